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
// Thread rule: none of its own; `fn` runs inline on the caller's thread.
#ifndef SKIPSWARM_MODEL_TORCH_GUARD_H_
#define SKIPSWARM_MODEL_TORCH_GUARD_H_

#include <c10/util/Exception.h>

#include <exception>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace skipswarm::model {

template <typename Fn>
auto TorchGuard(absl::string_view what, Fn&& fn,
                absl::StatusCode code = absl::StatusCode::kInternal) -> decltype(fn()) {
  try {
    return std::forward<Fn>(fn)();
  } catch (const c10::Error& e) {
    return absl::Status(code, absl::StrCat(what, ": libtorch: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::Status(code, absl::StrCat(what, ": ", e.what()));
  }
}

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_TORCH_GUARD_H_
