// TorchGuard: the one place where libtorch's exceptions become statuses
// (docs/DESIGN.md §5: no exception crosses a module boundary). Every call
// into libtorch that can throw, in model/ and in the libtorch-backed node
// computes, runs inside it.
//
//   absl::StatusOr<at::Tensor> y = model::TorchGuard("forward", [&] {
//     return absl::StatusOr<at::Tensor>(block->forward(x));
//   });
//   absl::Status s = model::TorchGuard("set gradients", [&]() -> absl::Status {
//     ...;
//     return absl::OkStatus();
//   });
//
// `fn` returns an absl::Status or an absl::StatusOr<T>; its own status
// passes through unchanged. A c10::Error becomes `code` (INTERNAL unless
// the caller knows better, e.g. DATA_LOSS for unreadable checkpoint bytes)
// with the message "<what>: libtorch: <message without backtrace>"; any
// other std::exception "<what>: <what()>".
//
// Note [Out of memory]: an allocation failure is RESOURCE_EXHAUSTED
// whatever `code` is, marked as out_of_memory.h says (IsOutOfMemory):
// c10::OutOfMemoryError (the CUDA caching allocator), the CPU allocator's
// c10::Error ("can't allocate memory" in libtorch 1.13, "not enough memory"
// later) and std::bad_alloc. The stage server lowers its memory slots on it
// and keeps running (Note [Memory slots] in node/stage/stage_server.cc).
//
// Thread rule: none of its own; `fn` runs inline on the caller's thread.
#ifndef SKIPSWARM_MODEL_TORCH_GUARD_H_
#define SKIPSWARM_MODEL_TORCH_GUARD_H_

#include <c10/util/Exception.h>

#include <exception>
#include <new>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "model/out_of_memory.h"

namespace skipswarm::model {

template <typename Fn>
auto TorchGuard(absl::string_view what, Fn&& fn,
                absl::StatusCode code = absl::StatusCode::kInternal) -> decltype(fn()) {
  try {
    return std::forward<Fn>(fn)();
  } catch (const c10::OutOfMemoryError& e) {
    return OutOfMemoryError(what, absl::StrCat("libtorch: ", e.what_without_backtrace()));
  } catch (const c10::Error& e) {
    if (IsAllocationFailureMessage(e.what_without_backtrace())) {
      return OutOfMemoryError(what, absl::StrCat("libtorch: ", e.what_without_backtrace()));
    }
    return absl::Status(code, absl::StrCat(what, ": libtorch: ", e.what_without_backtrace()));
  } catch (const std::bad_alloc& e) {
    return OutOfMemoryError(what, e.what());
  } catch (const std::exception& e) {
    return absl::Status(code, absl::StrCat(what, ": ", e.what()));
  }
}

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_TORCH_GUARD_H_
