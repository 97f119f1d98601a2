// File writes a crash cannot tear: WriteFileAtomically (temp file, fsync,
// rename over the target, fsync of the folder: a reader sees the old bytes
// or the new ones, never a mix) and RenameDurably (rename(2), then fsync of
// the destination's folder, so the new name survives a power cut).
// ReadFileBytes reads a whole file.
//
//   SS_RETURN_IF_ERROR(common::WriteFileAtomically(path, bytes));
//
// Thread rule: thread-safe (no shared state); concurrent writers of one path
// each write a temp file of their own (PATH.tmp.XXXXXX), the last rename wins.
#ifndef SKIPSWARM_COMMON_ATOMIC_FILE_H_
#define SKIPSWARM_COMMON_ATOMIC_FILE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace skipswarm::common {

// NotFound when `path` cannot be opened; DataLoss on a read error.
absl::StatusOr<std::string> ReadFileBytes(const std::string& path);

// Writes `bytes` to `path` with permission bits `mode` (0600 for a secret).
// Unavailable (naming the temp file and errno) when a step fails; the
// target is then unchanged and no temp file is left.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view bytes,
                                 int mode = 0644);
// The same for a file made of `pieces` written back to back (a header and
// large tensors, without first copying them into one buffer).
absl::Status WriteFileAtomically(const std::string& path,
                                 const std::vector<absl::string_view>& pieces, int mode = 0644);

// Unavailable when rename(2) fails. The folder's fsync is best effort (some
// filesystems refuse it).
absl::Status RenameDurably(const std::string& from, const std::string& to);

}  // namespace skipswarm::common

#endif  // SKIPSWARM_COMMON_ATOMIC_FILE_H_
