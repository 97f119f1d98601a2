#include "common/text_table.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/bounded_file.h"

namespace skipswarm::common {

absl::Status ForEachTableRow(absl::string_view text, absl::string_view what,
                             absl::FunctionRef<absl::Status(const TableRow&)> row) {
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = line.substr(0, line.find('#'));
    const TableRow fields = absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (fields.empty()) continue;
    absl::Status s = row(fields);
    if (!s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(what, " line ", line_no, ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadTextFile(const std::string& path, absl::string_view what) {
  // Bounded, regular files only (routes files, WAN tables, route records).
  absl::StatusOr<std::string> text = ReadBoundedFile(path, what);
  if (absl::IsNotFound(text.status())) {
    return absl::NotFoundError(absl::StrCat("cannot read ", what, " ", path));
  }
  return text;
}

}  // namespace skipswarm::common
