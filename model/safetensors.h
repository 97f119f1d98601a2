// A minimal writer (and header reader) of the safetensors format: an
// 8-byte little-endian header length, a JSON header
//   {"<name>": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]},
//    "__metadata__": {"<key>": "<value>", ...}}
// padded with spaces to a multiple of 8 bytes, then the tensors' bytes back
// to back in header order (offsets relative to the end of the header).
//
//   std::vector<SafetensorsTensor> ts = {{"w", "F32", {2, 3}, bytes_view}};
//   SS_RETURN_IF_ERROR(WriteSafetensors(path, ts, {{"format", "pt"}}));
//
// Only what the Hugging Face export needs: F32 / BF16 / F16 / I64 tensors,
// written little-endian as they are in memory (x86-64, aarch64).
//
// Thread rule: free functions.
#ifndef SKIPSWARM_MODEL_SAFETENSORS_H_
#define SKIPSWARM_MODEL_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace skipswarm::model {

struct SafetensorsTensor {
  std::string name;
  std::string dtype;  // "F32", "BF16", "F16", "I64"
  std::vector<int64_t> shape;
  absl::string_view data;  // borrowed: must outlive the write
};

// The 8-byte length plus the padded JSON header for `tensors` in order.
// InvalidArgument when a tensor's byte size disagrees with dtype x shape or
// a name repeats.
absl::StatusOr<std::string> SafetensorsHeader(const std::vector<SafetensorsTensor>& tensors,
                                              const std::map<std::string, std::string>& metadata);

// Writes header and data to `path` atomically (common::WriteFileAtomically:
// fsynced temp file, rename, folder fsync); Unavailable when a step fails.
absl::Status WriteSafetensors(const std::string& path,
                              const std::vector<SafetensorsTensor>& tensors,
                              const std::map<std::string, std::string>& metadata);

// What a safetensors file's header says about one tensor.
struct SafetensorsEntry {
  std::string dtype;
  std::vector<int64_t> shape;
  int64_t begin = 0, end = 0;  // data offsets
};
struct SafetensorsIndex {
  std::map<std::string, SafetensorsEntry> tensors;
  std::map<std::string, std::string> metadata;
  int64_t data_start = 0;  // file offset of the data section
};
// Parses and checks the header of a whole file's bytes (offsets inside the
// data, no overlap, sizes match dtype x shape).
absl::StatusOr<SafetensorsIndex> ReadSafetensorsIndex(absl::string_view file);

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_SAFETENSORS_H_
