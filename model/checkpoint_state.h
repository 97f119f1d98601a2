// The state section of a version-2 stage checkpoint (model/checkpoint.h
// gives the entry names): a module's weights, its AdamW state keyed by
// parameter name, and the averaging bytes, as a checkpoint_tensors.h list.
// Private to //model:checkpoint.
//
// Thread rule: free functions; the caller serialises access to the module
// and optimizer.
#ifndef SKIPSWARM_MODEL_CHECKPOINT_STATE_H_
#define SKIPSWARM_MODEL_CHECKPOINT_STATE_H_

#include <torch/optim/optimizer.h>

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/stage_module.h"

namespace skipswarm::model {

// `optimizer` may be null (no optimizer entries); else it must be an AdamW
// over the module's parameters (Unimplemented for another type,
// InvalidArgument when a parameter is not among its own). InvalidArgument
// for a parameter of a dtype the format does not store.
absl::StatusOr<std::string> EncodeStageState(StageModule& module,
                                             torch::optim::Optimizer* optimizer,
                                             absl::string_view averaging);
// EncodeStageState's bytes appended to `out`, which is first reserved for
// them and `reserve_after` more (what the caller appends next), so the
// state is copied once. On error `out` is as it was (its capacity aside).
absl::Status AppendStageState(StageModule& module, torch::optim::Optimizer* optimizer,
                              absl::string_view averaging, std::string& out,
                              size_t reserve_after);

// Checks every entry of `state` against `module` (and `optimizer` when it
// is not null and the state holds optimizer entries) before changing
// either; then copies the weights, replaces the AdamW state and sets
// *averaging (empty when none). DataLoss for a state that does not fit;
// Unimplemented when `optimizer` is not an AdamW and the state has
// optimizer entries; FailedPrecondition when a parameter with saved state
// is not among the optimizer's. On any error nothing is changed.
absl::Status DecodeStageState(absl::string_view state, StageModule& module,
                              torch::optim::Optimizer* optimizer, std::string* averaging);

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_CHECKPOINT_STATE_H_
