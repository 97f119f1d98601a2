// Test-only: rewriting the state of a version-2 stage checkpoint
// (model/checkpoint.h) entry by entry, for tests and fuzz seeds that need a
// well-formed file with a state SerializeStageState would never write (an
// optimizer state of the wrong shape, an unknown entry).
//
//   std::vector<OwnedTensorEntry> e = StateEntries(file).value();
//   e[0].dims = {1};  ...
//   std::string bad = WithStateEntries(file, e);   // lengths and CRC rewritten
#ifndef SKIPSWARM_MODEL_CHECKPOINT_TEST_UTIL_H_
#define SKIPSWARM_MODEL_CHECKPOINT_TEST_UTIL_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/crc32c.h"
#include "model/checkpoint_tensors.h"

namespace skipswarm::model::testing {

struct OwnedTensorEntry {
  std::string name;
  TensorDtype dtype = TensorDtype::kFloat32;
  std::vector<int64_t> dims;
  std::string data;
};

// The envelope's offsets (model/checkpoint.h): header at 16, then u64
// state_len, the state and a u32 CRC.
inline size_t CheckpointStateOffset(absl::string_view file) {
  uint32_t header_len = 0;
  std::memcpy(&header_len, file.data() + 12, 4);
  return 16 + size_t{header_len} + 8;
}

// The entries of a well-formed version-2 file's state.
inline absl::StatusOr<std::vector<OwnedTensorEntry>> StateEntries(absl::string_view file) {
  const size_t at = CheckpointStateOffset(file);
  absl::StatusOr<std::vector<TensorEntry>> parsed =
      ParseTensorList(file.substr(at, file.size() - 4 - at));
  if (!parsed.ok()) return parsed.status();
  std::vector<OwnedTensorEntry> out;
  for (const TensorEntry& e : *parsed) {
    out.push_back({e.name, e.dtype, e.dims, std::string(e.data)});
  }
  return out;
}

// `file` (version 2, well-formed) with its state made of `entries`; data
// sizes are written as given, so an entry may disagree with its dims.
inline std::string WithStateEntries(absl::string_view file,
                                    const std::vector<OwnedTensorEntry>& entries) {
  const size_t at = CheckpointStateOffset(file);
  auto put = [](std::string& out, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  std::string state;
  put(state, entries.size(), 4);
  for (const OwnedTensorEntry& e : entries) {
    put(state, e.name.size(), 2);
    state += e.name;
    put(state, static_cast<uint8_t>(e.dtype), 1);
    put(state, e.dims.size(), 1);
    for (int64_t d : e.dims) put(state, static_cast<uint64_t>(d), 8);
    put(state, e.data.size(), 8);
    state += e.data;
  }
  std::string out(file.substr(0, at - 8));
  put(out, state.size(), 8);
  out += state;
  put(out, common::Crc32c(out.data(), out.size()), 4);
  return out;
}

}  // namespace skipswarm::model::testing

#endif  // SKIPSWARM_MODEL_CHECKPOINT_TEST_UTIL_H_
