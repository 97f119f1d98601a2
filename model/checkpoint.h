// Per-stage checkpoints (weights + AdamW state + step + config hash) and
// the parameter digest replicas gossip to prove they agree.
//
//   SS_RETURN_IF_ERROR(SaveStageCheckpoint(path, module, &opt.adamw(), step));
//   SS_ASSIGN_OR_RETURN(CheckpointInfo info, LoadStageCheckpoint(path, module, &opt.adamw()));
//   std::string d = ParameterDigest(module);     // 64 hex chars
//
// File layout (version 1, little-endian):
//   "SSWCKPT\n" | u32 version | u32 header_len | header JSON |
//   u64 state_len | state (libtorch archive: "param/<name>" tensors and the
//   "optimizer" sub-archive) | u32 CRC-32C of everything before it.
// The header JSON holds config_hash, config, stage, step and `extra` (free
// text for the caller, e.g. the trainer's data position). The archive may
// also hold "averaging" (uint8 bytes: Note [Averaging state] in
// model/outer_optimizer.h, the outer state when H > 1); older files lack it.
//
// Saving is atomic (common::WriteFileAtomically: a temp file, fsync, rename
// over <path>, fsync of the folder). Loading checks magic, version, sizes, CRC, config hash and
// stage before touching the module, and every parameter name and shape
// before copying; a corrupted or foreign checkpoint is a clear Status
// (DataLoss / FailedPrecondition) and leaves the module unchanged.
// SerializeStageState/RestoreStageState are the same bytes without the file,
// for state transfer to a joining replica.
//
// Thread rule: free functions; the caller serialises access to the module.
// Calls on different modules may run at once: their libtorch archive work
// runs one at a time, process-wide (Note [One libtorch archive at a time]).
//
// Note [One libtorch archive at a time]
// A libtorch archive (torch::serialize::OutputArchive / InputArchive) is a
// TorchScript module underneath: building, saving and loading one goes
// through libtorch's process-wide TorchScript state (class types and their
// qualified names), which libtorch does not document as safe to use from
// two threads at once. One daemon process can do that: each hosted stage
// has its own lock, so one stage's checkpoint save (the trainer thread) can
// meet another stage's state export for a joiner or a peer's checkpoint
// copy (a gRPC thread), or an import. Under ThreadSanitizer two saves at
// once reported a race on a 17-byte string (a qualified name's size)
// written inside libtorch by one save and read by the other; libtorch is
// not built with TSan, so whether its own atomics order that is invisible.
// So every archive built, written, saved or loaded here holds one
// process-wide lock. Cheap: saves and exports are rare (checkpoint
// boundaries, joins), and only the archive work is serialised, not the
// copies of the weights to the CPU or the file writes.
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

struct CheckpointInfo {
  ModelConfig config;
  int stage = 0;
  int64_t step = 0;
  std::string extra;
  // The "averaging" bytes (Note [Averaging state]); empty when the file has
  // none. Set by RestoreStageState only, not by ReadCheckpointInfo.
  std::string averaging;
};

// `optimizer` may be null (weights only); `averaging` is stored when not
// empty.
absl::StatusOr<std::string> SerializeStageState(StageModule& module,
                                                torch::optim::Optimizer* optimizer, int64_t step,
                                                const std::string& extra = "",
                                                absl::string_view averaging = {});
// Restores into `module` (and `optimizer` when both it and the saved state
// are present). The bytes must be for module.config() and module.stage().
absl::StatusOr<CheckpointInfo> RestoreStageState(absl::string_view bytes, StageModule& module,
                                                 torch::optim::Optimizer* optimizer);
// Header only (validated, CRC checked): what a file holds.
absl::StatusOr<CheckpointInfo> ReadCheckpointInfo(absl::string_view bytes);

absl::Status SaveStageCheckpoint(const std::string& path, StageModule& module,
                                 torch::optim::Optimizer* optimizer, int64_t step,
                                 const std::string& extra = "", absl::string_view averaging = {});
absl::StatusOr<CheckpointInfo> LoadStageCheckpoint(const std::string& path, StageModule& module,
                                                   torch::optim::Optimizer* optimizer);
// SHA-256 (hex) over every parameter's name, shape and float32 bytes, in
// order. Equal digests <=> bit-identical replicas.
std::string ParameterDigest(StageModule& module);

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_CHECKPOINT_H_
