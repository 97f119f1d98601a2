// Per-stage checkpoints (weights + AdamW state + step + config hash) and
// the parameter digest replicas gossip to prove they agree.
//
//   SS_RETURN_IF_ERROR(SaveStageCheckpoint(path, module, &opt.adamw(), step));
//   SS_ASSIGN_OR_RETURN(CheckpointInfo info, LoadStageCheckpoint(path, module, &opt.adamw()));
//   std::string d = ParameterDigest(module);     // 64 hex chars
//
// File layout (version 2, little-endian):
//   "SSWCKPT\n" | u32 version | u32 header_len | header JSON |
//   u64 state_len | state | u32 CRC-32C of everything before it.
// The header JSON holds config_hash, config, stage, step and `extra` (free
// text for the caller, e.g. the trainer's data position). The state is a
// list of named raw tensors (model/checkpoint_tensors.h: our own layout,
// parsed by our own bounded code, never by libtorch's archive loader):
//   "param/<name>"                 each parameter (its dtype and shape)
//   "optimizer"                    uint8 bytes "adamw" when AdamW state follows
//   "adamw/<name>/step"            int64 scalar, per parameter with state
//   "adamw/<name>/exp_avg", "adamw/<name>/exp_avg_sq" (the parameter's shape
//   and dtype), "adamw/<name>/max_exp_avg_sq" (amsgrad groups only)
//   "averaging"                    uint8 bytes (Note [Averaging state] in
//                                  model/outer_optimizer.h); older files lack it
// AdamW state is keyed by parameter name, not by libtorch's TensorImpl
// address, and param-group options (lr, betas, ...) are not stored: the
// optimizer's own options stay, as libtorch's optimizer->load left them.
// Only AdamW state is stored: another optimizer type is Unimplemented.
//
// Version 1 (older releases) held a libtorch archive as the state, which
// libtorch loads through its TorchScript importer, and that crashes on some
// hostile archives (tests/fuzz/README.md). So version 1 is read only with
// StateSource::kLocalFile (a user's own file: LoadStageCheckpoint), through
// model/checkpoint_v1.h; bytes from a peer (StateSource::kPeer: state
// transfer) must be version 2, and version 1 is refused before any libtorch
// call. Writing is always version 2.
//
// Saving is atomic (common::WriteFileAtomically: a temp file, fsync, rename
// over <path>, fsync of the folder). Loading checks magic, version, sizes,
// CRC, config hash and stage, then every entry (known names only, every
// parameter present with its shape and dtype, finite floats; AdamW state:
// shapes and dtypes of its parameter, step >= 0, finite, exp_avg_sq >= 0)
// before touching the module or the optimizer: a corrupted or foreign
// checkpoint is a clear Status (DataLoss / FailedPrecondition) and leaves
// both unchanged. With AdamW state in the file, the optimizer's state
// becomes exactly the file's (a parameter without saved state has none).
// SerializeStageState/RestoreStageState are the same bytes without the
// file, for state transfer to a joining replica.
//
// Thread rule: free functions; the caller serialises access to the module
// and optimizer. Calls on different modules may run at once (version-1
// reads run one at a time: Note [One libtorch archive at a time] in
// model/checkpoint_v1.h).
#ifndef SKIPSWARM_MODEL_CHECKPOINT_H_
#define SKIPSWARM_MODEL_CHECKPOINT_H_

#include <torch/optim/optimizer.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/model_config.h"
#include "model/stage_module.h"

namespace skipswarm::model {

// Where restored bytes come from: version 1 is read from a local file only.
enum class StateSource {
  kPeer,       // state transfer: version 2 only
  kLocalFile,  // the user's own checkpoint file: version 1 or 2
};

struct CheckpointInfo {
  ModelConfig config;
  int stage = 0;
  int64_t step = 0;
  std::string extra;
  // The "averaging" bytes (Note [Averaging state]); empty when the file has
  // none. Set by RestoreStageState only, not by ReadCheckpointInfo.
  std::string averaging;
};

// `optimizer` may be null (weights only), else an AdamW (another type is
// Unimplemented); `averaging` is stored when not empty.
absl::StatusOr<std::string> SerializeStageState(StageModule& module,
                                                torch::optim::Optimizer* optimizer, int64_t step,
                                                const std::string& extra = "",
                                                absl::string_view averaging = {});
// Restores into `module` (and `optimizer` when both it and the saved state
// are present; `optimizer` must then be an AdamW over the module's
// parameters). The bytes must be for module.config() and module.stage().
absl::StatusOr<CheckpointInfo> RestoreStageState(absl::string_view bytes, StageModule& module,
                                                 torch::optim::Optimizer* optimizer,
                                                 StateSource source);
// FailedPrecondition when `bytes` are a version-1 checkpoint and `source`
// is kPeer; OK otherwise (only the magic and version are looked at:
// ReadCheckpointInfo / RestoreStageState check the rest). For bytes from a
// peer that are kept to be read as a local file later (launcher/
// peer_copies.h): RestoreStageState checks it itself.
absl::Status CheckFormatForSource(absl::string_view bytes, StateSource source);
// Header only (validated, CRC checked; version 1 or 2): what a file holds.
absl::StatusOr<CheckpointInfo> ReadCheckpointInfo(absl::string_view bytes);

absl::Status SaveStageCheckpoint(const std::string& path, StageModule& module,
                                 torch::optim::Optimizer* optimizer, int64_t step,
                                 const std::string& extra = "", absl::string_view averaging = {});
// Reads with StateSource::kLocalFile.
absl::StatusOr<CheckpointInfo> LoadStageCheckpoint(const std::string& path, StageModule& module,
                                                   torch::optim::Optimizer* optimizer);
// SHA-256 (hex) over every parameter's name, shape and float32 bytes, in
// order. Equal digests <=> bit-identical replicas.
std::string ParameterDigest(StageModule& module);

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_CHECKPOINT_H_
