// OuterOptimizer: the DiLoCo-style outer step of a stage's replicas (Note
// [Outer steps] in node/train/node_trainer.h). Between syncs each replica
// takes H local AdamW steps from the same anchor; at a sync its
// pseudo-gradient is what it moved (anchor - params), the replicas average
// those, and every replica applies the same outer SGD step with Nesterov
// momentum to the anchor:
//
//   m      = momentum * m + g          (g: the averaged pseudo-gradient)
//   anchor = anchor - lr * (g + momentum * m)
//   params = anchor
//
// With lr = 1 and momentum = 0 that is plain parameter averaging.
//
//   OuterOptimizer outer(options, FlattenParameters(module));
//   ... H local steps ...
//   at::Tensor g = outer.PseudoGradient(FlattenParameters(module));
//   ... average g over the replicas ...
//   SS_ASSIGN_OR_RETURN(at::Tensor p, outer.Step(mean));  // load p into the module
//
// Note [Averaging state]: a replica's averaging state is the anchor, the
// outer momentum and the codec's error-feedback residual (avg_codec.h); a
// replica that joins or re-syncs must take all three from its source, or
// its next pseudo-gradient and the group's momentum diverge.
// SerializeAveragingState / RestoreAveragingState carry them (state
// transfer appends them to the stage state, torch_stage_compute.cc; stage
// checkpoints, and so checkpoint generations, hold them in their archive,
// model/checkpoint.h). A checkpoint without them loads with the anchor at
// the loaded weights and zero momentum and residual, and says so.
//
// Thread rule: thread-compatible.
#ifndef SKIPSWARM_MODEL_OUTER_OPTIMIZER_H_
#define SKIPSWARM_MODEL_OUTER_OPTIMIZER_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/averaging_options.h"
#include "model/avg_codec.h"
#include "model/stage_module.h"

namespace skipswarm::model {

class OuterOptimizer {
 public:
  // `params`: the stage's parameters as one float32 vector (the anchor).
  OuterOptimizer(const AveragingOptions& options, const at::Tensor& params);

  // anchor - params (float32, same size). REQUIRES: params.numel() == numel().
  at::Tensor PseudoGradient(const at::Tensor& params) const;
  // One outer step with the averaged pseudo-gradient `mean`; returns the new
  // parameters (= the new anchor). InvalidArgument on a wrong size or a
  // non-finite `mean` (nothing changes then).
  absl::StatusOr<at::Tensor> Step(const at::Tensor& mean);
  // New anchor, zero momentum (a checkpoint was loaded).
  void Reset(const at::Tensor& params);

  int64_t numel() const { return anchor_.numel(); }
  int64_t syncs() const { return syncs_; }
  const at::Tensor& anchor() const { return anchor_; }
  const at::Tensor& momentum() const { return momentum_; }
  // FNV-1a over the anchor's bytes and syncs(): equal on replicas that
  // start a round from the same anchor.
  uint64_t AnchorDigest() const;

 private:
  friend std::string SerializeAveragingState(const OuterOptimizer*, const AveragingCodec*);
  friend absl::Status RestoreAveragingState(absl::string_view, OuterOptimizer*, AveragingCodec*);

  AveragingOptions options_;
  at::Tensor anchor_;    // float32 [n]
  at::Tensor momentum_;  // float32 [n]
  int64_t syncs_ = 0;
};

// Note [Averaging state]. Layout: "SSAVGST1" | u64 numel | u64 syncs |
// u32 parts (bit 0 anchor+momentum, bit 1 residual) | the parts' float32
// vectors | u32 CRC-32C of everything before it. Either pointer may be null.
std::string SerializeAveragingState(const OuterOptimizer* outer, const AveragingCodec* codec);
// Restores what the bytes hold into the non-null targets; DataLoss on a bad
// checksum, InvalidArgument on a size mismatch; nothing changes on error.
// A part the bytes lack resets its target (anchor stays, momentum and
// residual become zero).
absl::Status RestoreAveragingState(absl::string_view bytes, OuterOptimizer* outer,
                                   AveragingCodec* codec);

// The stage's parameters as one float32 CPU vector, and back (parameter
// order, as FlattenGradients in optimizer.h).
at::Tensor FlattenParameters(StageModule& module);
absl::Status SetParametersFromFlat(StageModule& module, const at::Tensor& flat);

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_OUTER_OPTIMIZER_H_
