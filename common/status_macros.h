// Early-return helpers for absl::Status / absl::StatusOr (Abseil 20220623
// ships none).
//
//   absl::Status Load(...) {
//     SS_RETURN_IF_ERROR(CheckHeader(h));
//     SS_ASSIGN_OR_RETURN(Config config, ParseConfig(text));
//     ...
//   }
//
// Errors are returned unchanged; add context with common::Annotate.
#ifndef SKIPSWARM_COMMON_STATUS_MACROS_H_
#define SKIPSWARM_COMMON_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace skipswarm::common {

// Returns `status` with "`context`: " prepended to its message (same code).
inline absl::Status Annotate(const absl::Status& status,
                             absl::string_view context) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat(context, ": ", status.message()));
}

}  // namespace skipswarm::common

#define SS_STATUS_CONCAT_INNER_(a, b) a##b
#define SS_STATUS_CONCAT_(a, b) SS_STATUS_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status) and returns it from the enclosing
// function if it is not OK.
#define SS_RETURN_IF_ERROR(expr)                        \
  do {                                                  \
    ::absl::Status ss_status_ = (expr);                 \
    if (!ss_status_.ok()) return ss_status_;            \
  } while (false)

// Evaluates `rexpr` (an absl::StatusOr<T>); on error returns its status,
// otherwise moves the value into `lhs` (a declaration or an lvalue).
#define SS_ASSIGN_OR_RETURN(lhs, rexpr) \
  SS_ASSIGN_OR_RETURN_IMPL_(SS_STATUS_CONCAT_(ss_statusor_, __LINE__), lhs, rexpr)

#define SS_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                              \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

#endif  // SKIPSWARM_COMMON_STATUS_MACROS_H_
