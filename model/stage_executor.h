// StageExecutor: runs one pipeline stage one hop at a time, as the node
// daemon drives it (docs/DESIGN.md §3 "Compute").
//
// Forward keeps what the backward needs, keyed by a micro-batch id chosen
// by the caller (unique among in-flight MBs of this executor); Backward
// consumes it. The data stage (0) has three entry points instead of one:
//
//   // at the origin                          // at a relay hosting stage s
//   x  = exec0->Start(mb, tokens)             y  = exec->Forward(mb, x)
//   ... x travels the route ...               ... later ...
//   t  = exec0->Tail(x_final, targets, 1.0)   gx = exec->Backward(mb, gy)
//   ... t.grad_input travels back ...
//   exec0->Backward(mb, g)   // ends the MB; returns an undefined tensor
//
// Gradients accumulate in the module's parameters across MBs (one sum per
// MB, each MB's loss being its token mean); visits() counts completed
// backwards so the optimiser can weight by visit count (optimizer.h).
// Every input is checked (dtype, rank, shape, token range) and every libtorch
// exception is caught: errors come back as absl::Status.
//
// Thread rule: thread-compatible. One caller at a time (a node serves one
// task at a time, docs/DESIGN.md §5); wrap it in a lock otherwise.
#ifndef SKIPSWARM_MODEL_STAGE_EXECUTOR_H_
#define SKIPSWARM_MODEL_STAGE_EXECUTOR_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <unordered_map>

#include "absl/status/statusor.h"
#include "model/model_config.h"
#include "model/stage_module.h"

namespace skipswarm::model {

// Eval runs without autograd and keeps nothing for a backward.
enum class Mode { kTrain, kEval };

struct TailResult {
  double loss = 0;        // mean token cross-entropy of this MB
  at::Tensor grad_input;  // d(loss_scale * loss)/d(activation); undefined in kEval
};

class StageExecutor {
 public:
  // Builds only stage `stage` of `config` on runtime.device.
  static absl::StatusOr<std::unique_ptr<StageExecutor>> Create(
      const ModelConfig& config, int stage, const RuntimeOptions& runtime = {});

  int stage() const { return module_->stage(); }
  const ModelConfig& config() const { return module_->config(); }
  at::Device device() const { return device_; }
  StageModule& module() { return *module_; }
  std::shared_ptr<StageModule> shared_module() { return module_; }

  // Stage 0: tokens [B, T] (integer, each < vocab, 1 <= T <= seq_len) ->
  // activation [B, T, D] after the embedding and stage 0's blocks.
  absl::StatusOr<at::Tensor> Start(uint64_t mb, const at::Tensor& tokens,
                                   Mode mode = Mode::kTrain);
  // Any stage > 0: activation [B, T, D] -> [B, T, D] through this stage's blocks.
  absl::StatusOr<at::Tensor> Forward(uint64_t mb, const at::Tensor& input,
                                     Mode mode = Mode::kTrain);
  // Stage 0: final norm + head + loss on the route's last activation, and (in
  // kTrain) the backward through them, scaled by loss_scale. Keeps nothing.
  absl::StatusOr<TailResult> Tail(const at::Tensor& activation, const at::Tensor& targets,
                                  double loss_scale = 1.0, Mode mode = Mode::kTrain);
  // Backward of an earlier Start/Forward of `mb`: grad_output has the shape
  // of that output; returns the gradient of its input (undefined for Start).
  // NotFound if no such MB is pending. With train_parameters false (a stage
  // frozen by SDP backward masking, model/sdp_assignment.h) only the input
  // gradient is computed: no parameter gradient accumulates, the backward
  // work of the weights is skipped, and no visit is counted.
  absl::StatusOr<at::Tensor> Backward(uint64_t mb, const at::Tensor& grad_output,
                                      bool train_parameters = true);

  // Stage > 0: the gradient of `input` that Forward(input) then
  // Backward(grad_output) would return, recomputed now and keeping nothing:
  // no stash, no parameter gradient, no visit (verified compute's
  // verify-only backward, Note [Verify-only forward] in
  // node/compute/torch_stage_compute.cc).
  absl::StatusOr<at::Tensor> RecomputeInputGradient(const at::Tensor& input,
                                                    const at::Tensor& grad_output);

  // Drops a pending MB (lost downstream). Returns whether it was pending.
  bool Discard(uint64_t mb);
  size_t pending() const { return stash_.size(); }

  // Backwards completed since the last ZeroGrad().
  int64_t visits() const { return visits_; }
  void ZeroGrad();

 private:
  StageExecutor(std::shared_ptr<StageModule> module, at::Device device,
                const RuntimeOptions& runtime);
  absl::Status CheckActivation(const at::Tensor& x, const char* what) const;

  struct Stash {
    at::Tensor input;   // leaf requiring grad; undefined for Start
    at::Tensor output;
  };
  std::shared_ptr<StageModule> module_;
  at::Device device_;
  RuntimeOptions runtime_;
  std::unordered_map<uint64_t, Stash> stash_;
  int64_t visits_ = 0;
};

// Parses "cpu", "cuda", "cuda:N"; Unavailable when the libtorch in use has
// no CUDA. Sets intra-op threads (0 = all cores). Call once from main.
absl::StatusOr<at::Device> ApplyRuntimeOptions(const RuntimeOptions& runtime);
absl::StatusOr<at::Device> ParseDevice(const std::string& device);

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_STAGE_EXECUTOR_H_
