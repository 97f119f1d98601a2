// ReadBoundedFile: reads a small input file (a config, a scenario, a routes
// file) whole, refusing what is not a regular file (/dev/zero, a FIFO, a
// folder) and anything over a size bound, before reading a byte more than
// the bound allows.
//
//   SS_ASSIGN_OR_RETURN(std::string text,
//                       common::ReadBoundedFile(path, "config file"));
//
// Thread rule: thread-safe (no shared state).
#ifndef SKIPSWARM_COMMON_BOUNDED_FILE_H_
#define SKIPSWARM_COMMON_BOUNDED_FILE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace skipswarm::common {

inline constexpr uint64_t kMaxInputFileBytes = uint64_t{16} << 20;  // 16 MiB

// NOT_FOUND when `path` cannot be opened; INVALID_ARGUMENT when it is not a
// regular file or is larger than `max_bytes`. `what` names the file's role
// in messages ("config file 'x.json' ...").
absl::StatusOr<std::string> ReadBoundedFile(const std::string& path, absl::string_view what,
                                            uint64_t max_bytes = kMaxInputFileBytes);

}  // namespace skipswarm::common

#endif  // SKIPSWARM_COMMON_BOUNDED_FILE_H_
