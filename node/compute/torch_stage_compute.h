// TorchStageCompute: the real StageCompute, over model::StageExecutor.
// Decodes untrusted wire tensors with the model's codec (shape, dtype and
// checksum checked before use), runs the stage, encodes the result with the
// configured codec, and owns the stage's AdamW optimiser.
//
//   TorchStageCompute::Options o;
//   o.model = config; o.stage = 2; o.codec = model::Codec::kRawFp32;
//   SS_ASSIGN_OR_RETURN(auto compute, TorchStageCompute::Create(o, &runner));
//
// Thread rule: thread-safe. Micro-batch work runs as tasks on `runner`
// (which must outlive this object and every task it was given); `done` runs
// on the runner's thread after the work, with no lock held. The synchronous
// methods take the same lock as the tasks, so they wait for a running task.
#ifndef SKIPSWARM_NODE_COMPUTE_TORCH_STAGE_COMPUTE_H_
#define SKIPSWARM_NODE_COMPUTE_TORCH_STAGE_COMPUTE_H_

#include <functional>
#include <memory>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "model/model_config.h"
#include "model/averaging_options.h"
#include "model/avg_codec.h"
#include "model/optimizer.h"
#include "model/output_sketch.h"
#include "model/outer_optimizer.h"
#include "model/tensor_codec.h"
#include "node/compute/stage_compute.h"
#include "node/compute/task_runner.h"

namespace skipswarm::model {
class StageExecutor;
}

namespace skipswarm::node {

class TorchStageCompute final : public StageCompute {
 public:
  struct Options {
    model::ModelConfig model;
    int stage = 0;
    model::RuntimeOptions runtime;
    // Codec of activations and gradients this stage sends.
    model::EncodeOptions encode;
    // Largest accepted micro-batch (samples) in a received activation.
    int64_t max_samples = 256;
    // AdamW, schedule and clipping: the reference trainer's (optimizer.h).
    model::OptimizerOptions optimizer;
    // SDP backward masking (model/sdp_assignment.h): a stage this node runs
    // forward but does not train. Backward passes only the input gradient
    // (no parameter gradient, no visit, the weights' backward skipped),
    // the parameters do not require gradients, and ImportState restores the
    // weights only (no AdamW state is ever held). Not for stage 0.
    bool frozen = false;
    // Note [Outer steps] in node/train/node_trainer.h: H, the outer
    // optimiser and the averaging codec. The default (H = 1, fp32) is the
    // plain per-iteration gradient average. Ignored when frozen.
    model::AveragingOptions averaging;
  };

  static absl::StatusOr<std::unique_ptr<TorchStageCompute>> Create(const Options& options,
                                                                   TaskRunner* runner);
  ~TorchStageCompute() override;

  int stage() const override { return options_.stage; }
  int64_t num_params() const override { return num_params_; }
  void Start(uint64_t mb, MicroBatchData data, TensorDone done) override;
  void Forward(uint64_t mb, WireTensor input, TensorDone done) override;
  void Tail(uint64_t mb, WireTensor activation, TailDone done) override;
  void Backward(uint64_t mb, WireTensor grad_output, TensorDone done) override;
  // Note [Verify-only forward]: input (and gradient) decoded and checked as
  // Forward (Backward) does; run as tasks on the runner.
  void SketchForward(WireTensor input, uint64_t seed, SketchDone done) override;
  void SketchBackward(WireTensor input, WireTensor grad_output, uint64_t seed,
                      SketchDone done) override;
  bool Discard(uint64_t mb) override;
  size_t pending() const override;
  absl::StatusOr<GradientSum> TakeGradients() override;
  absl::StatusOr<UpdateStats> ApplyUpdate(const std::vector<float>& summed,
                                          int64_t total_visits) override;
  absl::StatusOr<UpdateStats> ApplyLocalUpdate() override;
  void ZeroGrad() override;
  uint64_t ParamsDigest() override;
  int64_t step() const override;
  absl::Status SaveCheckpoint(const std::string& path) override;
  absl::StatusOr<int64_t> LoadCheckpoint(const std::string& path) override;
  absl::StatusOr<std::string> ExportState() override;
  absl::StatusOr<int64_t> ImportState(absl::string_view bytes) override;
  // torch_stage_compute_averaging.cc.
  AveragingPlan averaging() const override;
  void SetUploadFraction(double fraction) override;
  absl::StatusOr<AverageContribution> CompressGradients(std::vector<float> flat) override;
  absl::StatusOr<AverageContribution> TakePseudoGradient() override;
  absl::StatusOr<UpdateStats> ApplyOuterStep(const std::vector<float>& summed,
                                             int contributors) override;

  // For tests and checkpoints. REQUIRES: no task running (so nothing else
  // reads or writes the executor; the caller's promise, not a lock).
  model::StageExecutor& executor() ABSL_NO_THREAD_SAFETY_ANALYSIS { return *executor_; }

 private:
  TorchStageCompute(const Options& options, TaskRunner* runner,
                    std::unique_ptr<model::StageExecutor> executor);

  absl::StatusOr<WireTensor> DoStart(uint64_t mb, const MicroBatchData& data);
  absl::StatusOr<WireTensor> DoForward(uint64_t mb, const WireTensor& input);
  absl::StatusOr<model::OutputSketch> DoSketchBackward(const WireTensor& input,
                                                       const WireTensor& grad_output,
                                                       uint64_t seed);
  absl::StatusOr<model::OutputSketch> DoSketchForward(const WireTensor& input, uint64_t seed);
  absl::StatusOr<TailOutput> DoTail(uint64_t mb, const WireTensor& activation);
  absl::StatusOr<WireTensor> DoBackward(uint64_t mb, const WireTensor& grad);

  const Options options_;
  TaskRunner* const runner_;
  int64_t num_params_ = 0;

  mutable absl::Mutex mu_;
  std::unique_ptr<model::StageExecutor> executor_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<model::StageOptimizer> optimizer_ ABSL_GUARDED_BY(mu_);
  // Stage 0: targets of started MBs, until their Tail.
  struct Targets;
  absl::flat_hash_map<uint64_t, std::shared_ptr<Targets>> targets_ ABSL_GUARDED_BY(mu_);
  int64_t step_ ABSL_GUARDED_BY(mu_) = 0;
  // Note [Digest cache]: ParamsDigest's value until the parameters or the
  // step change; every method that changes either clears it.
  std::optional<uint64_t> digest_ ABSL_GUARDED_BY(mu_);
  // Note [Averaging state] in model/outer_optimizer.h: null unless H > 1 /
  // the codec is lossy.
  std::unique_ptr<model::OuterOptimizer> outer_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<model::AveragingCodec> codec_ ABSL_GUARDED_BY(mu_);
  // Note [Thinned uploads]: for the next TakePseudoGradient only.
  double upload_fraction_ ABSL_GUARDED_BY(mu_) = 1;
  // Note [Overlapped sync] (node/train/node_trainer.h): the parameters at
  // the last TakePseudoGradient; ApplyOuterStep keeps what was trained
  // since on top of the new anchor. Undefined without overlap.
  at::Tensor at_round_start_ ABSL_GUARDED_BY(mu_);

  // The stage state plus the averaging state, and back (state transfer).
  absl::StatusOr<std::string> ExportLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<int64_t> ImportLocked(absl::string_view bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After weights were loaded without averaging state: the anchor is the
  // loaded weights, momentum and residual start at zero.
  void ResetAveragingLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // SerializeAveragingState's bytes, or "" when there is no averaging state.
  std::string AveragingStateLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After a checkpoint's weights were loaded: its averaging bytes restored,
  // or (an older file, or none saved) the reset above with a log line
  // naming `what`. A part the bytes lack is reset (anchor = weights).
  absl::Status RestoreAveragingLocked(absl::string_view bytes, const std::string& what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
};

// proto::TensorMeta <-> model::TensorMeta (same fields, same enum values).
model::TensorMeta FromProto(const proto::TensorMeta& meta);
proto::TensorMeta ToProto(const model::TensorMeta& meta);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_COMPUTE_TORCH_STAGE_COMPUTE_H_
