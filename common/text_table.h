// Line-oriented text tables, as the WAN link table and the routes file use:
// one record per line, whitespace-separated fields, '#' starts a comment,
// blank lines are skipped.
//
//   SS_RETURN_IF_ERROR(ForEachTableRow(text, "routes file", [&](const TableRow& f) {
//     if (f.size() < 2) return absl::InvalidArgumentError("expected: A B");
//     ...
//     return absl::OkStatus();
//   }));
#ifndef SKIPSWARM_COMMON_TEXT_TABLE_H_
#define SKIPSWARM_COMMON_TEXT_TABLE_H_

#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace skipswarm::common {

using TableRow = std::vector<absl::string_view>;

// Calls `row` with the fields of every non-empty line, in order. The first
// error `row` returns stops the walk and comes back as INVALID_ARGUMENT
// "<what> line <N>: <its message>".
absl::Status ForEachTableRow(absl::string_view text, absl::string_view what,
                             absl::FunctionRef<absl::Status(const TableRow&)> row);

// The whole file at `path`; NOT_FOUND "cannot read <what> <path>".
absl::StatusOr<std::string> ReadTextFile(const std::string& path, absl::string_view what);

}  // namespace skipswarm::common

#endif  // SKIPSWARM_COMMON_TEXT_TABLE_H_
