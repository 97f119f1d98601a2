// LocalPipeline: every stage of the model in one process, executing
// micro-batches along routes hop by hop through the same StageExecutor API
// the node daemon uses. The reference trainer and the evaluator are built
// on it; MonolithicLoss is the same maths as one autograd graph (the
// yardstick for the equivalence tests and the throughput benchmark).
//
//   SS_ASSIGN_OR_RETURN(auto pipe, LocalPipeline::Create(config, runtime));
//   SS_ASSIGN_OR_RETURN(double loss,
//                       pipe->TrainMicroBatch(mb, {0, 2, 1, 4}, tokens, targets));
//
// Thread rule: thread-compatible.
#ifndef SKIPSWARM_MODEL_LOCAL_PIPELINE_H_
#define SKIPSWARM_MODEL_LOCAL_PIPELINE_H_

#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "model/model_config.h"
#include "model/stage_executor.h"

namespace skipswarm::model {

class LocalPipeline {
 public:
  static absl::StatusOr<std::unique_ptr<LocalPipeline>> Create(
      const ModelConfig& config, const RuntimeOptions& runtime = {});

  const ModelConfig& config() const { return config_; }
  int num_stages() const { return static_cast<int>(executors_.size()); }
  StageExecutor& stage(int s) { return *executors_[s]; }

  // Forward along `route` (ValidateRoute), tail loss, then backward along the
  // reversed route; parameter gradients accumulate (scaled by loss_scale).
  // Stages in `frozen` are run forward and passed through backward without
  // parameter gradients or visits (SDP backward masking); stage 0 cannot be
  // frozen. Returns the MB's mean token loss.
  absl::StatusOr<double> TrainMicroBatch(uint64_t mb, const std::vector<int>& route,
                                         const at::Tensor& tokens, const at::Tensor& targets,
                                         double loss_scale = 1.0,
                                         const std::vector<int>& frozen = {});
  // Forward only (no autograd); returns the mean token loss. Each non-zero
  // stage's residual update is scaled by `residual_scale`: x <- x + a*(F(x) - x)
  // for a hop x -> F(x) (Note [Depth calibration] in evaluate.h); 1 runs the
  // plain model.
  absl::StatusOr<double> EvalMicroBatch(const std::vector<int>& route, const at::Tensor& tokens,
                                        const at::Tensor& targets, double residual_scale = 1.0);

  void ZeroGrad();

 private:
  LocalPipeline(const ModelConfig& config,
                std::vector<std::unique_ptr<StageExecutor>> executors)
      : config_(config), executors_(std::move(executors)) {}

  ModelConfig config_;
  std::vector<std::unique_ptr<StageExecutor>> executors_;
};

// The loss of the model given by `stages` (indexed by stage id) along
// `route`, computed as one autograd graph without any detach or stash.
// REQUIRES: stages[0] is the data stage, route valid. May throw c10::Error
// (test and benchmark helper).
at::Tensor MonolithicLoss(const std::vector<StageModule*>& stages, const std::vector<int>& route,
                          const at::Tensor& tokens, const at::Tensor& targets);

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_LOCAL_PIPELINE_H_
