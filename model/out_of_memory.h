// How an allocation failure looks as a status, without libtorch: the
// marker TorchGuard (torch_guard.h, Note [Out of memory]) writes and the
// check the node's stage server makes (Note [Memory slots] in
// node/stage/stage_server.cc). A RESOURCE_EXHAUSTED without the marker
// (e.g. a decoder refusing an oversized tensor from a peer) is not one.
//
//   if (model::IsOutOfMemory(status)) ... lower the memory slots ...
//
// Thread rule: pure functions.
#ifndef SKIPSWARM_MODEL_OUT_OF_MEMORY_H_
#define SKIPSWARM_MODEL_OUT_OF_MEMORY_H_

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace skipswarm::model {

inline constexpr char kOutOfMemory[] = "out of memory";

// RESOURCE_EXHAUSTED "<what>: out of memory: <detail>".
inline absl::Status OutOfMemoryError(absl::string_view what, absl::string_view detail) {
  return absl::ResourceExhaustedError(absl::StrCat(what, ": ", kOutOfMemory, ": ", detail));
}

// Whether `s` reports a failed allocation (OutOfMemoryError's form).
inline bool IsOutOfMemory(const absl::Status& s) {
  return absl::IsResourceExhausted(s) && absl::StrContains(s.message(), kOutOfMemory);
}

// Whether a libtorch error message reports a failed allocation: the CPU
// allocator's "can't allocate memory" (1.13) or "not enough memory", the
// CUDA caching allocator's "out of memory".
inline bool IsAllocationFailureMessage(absl::string_view m) {
  return absl::StrContains(m, "can't allocate memory") ||
         absl::StrContains(m, "not enough memory") || absl::StrContains(m, kOutOfMemory);
}

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_OUT_OF_MEMORY_H_
