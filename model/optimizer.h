// Optimiser pieces shared by the reference trainer and the node daemon:
// AdamW with warm-up + cosine learning rate, gradient-norm clipping, and
// gradient weighting by micro-batch visit counts (docs/DESIGN.md §6).
//
//   StageOptimizer opt(executor->module(), options);
//   ... run MBs through the executor; node: average FlattenGradients() over
//   ... replicas (sum of grads, sum of visits) and SetGradientsFromFlat() ...
//   SS_ASSIGN_OR_RETURN(StepStats s, opt.Step(iteration, total_visits));
//
// Note [Visit weighting]: each MB backward adds the gradient of that MB's
// mean token loss, so after an iteration a stage holds the sum over the MBs
// that visited it. Step() divides by the number of visits (summed over
// replicas), giving every stage the mean gradient of the MBs it actually
// saw; a stage nobody visited does not step. Clipping (max norm 1.0) is per
// stage, because in the swarm each stage's replicas step on their own.
//
// Thread rule: thread-compatible; borrows the module, which must outlive it.
#ifndef SKIPSWARM_MODEL_OPTIMIZER_H_
#define SKIPSWARM_MODEL_OPTIMIZER_H_

#include <ATen/ATen.h>
#include <torch/optim/adamw.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "model/optimizer_options.h"
#include "model/stage_module.h"

namespace skipswarm::model {

struct StepStats {
  bool stepped = false;     // false when visits == 0
  double grad_norm = 0;     // after visit weighting, before clipping
  double lr = 0;
};

class StageOptimizer {
 public:
  StageOptimizer(StageModule& module, const OptimizerOptions& options);

  // Divides gradients by `visits` (Note [Visit weighting]), clips, sets the
  // learning rate of `step`, takes one AdamW step and clears the gradients.
  // InvalidArgument on non-finite gradients (nothing is changed then except
  // that gradients are cleared).
  absl::StatusOr<StepStats> Step(int64_t step, double visits);

  torch::optim::AdamW& adamw() { return *adamw_; }
  const OptimizerOptions& options() const { return options_; }

 private:
  StageModule& module_;
  OptimizerOptions options_;
  std::unique_ptr<torch::optim::AdamW> adamw_;
};

// All gradients of `module` as one float32 CPU vector in parameter order
// (zeros where a parameter has no gradient): the unit of replica averaging.
at::Tensor FlattenGradients(StageModule& module);
// Inverse of FlattenGradients; InvalidArgument when the size is wrong.
absl::Status SetGradientsFromFlat(StageModule& module, const at::Tensor& flat);

// Note [Foreach AdamW]: one step of `adamw` (the arithmetic of libtorch's
// AdamW::step, state kept in adamw.state() as it keeps it, so checkpoints
// and state transfer are unchanged) with each of its ~10 operations run
// over a whole parameter group's list (at::_foreach_*) instead of parameter
// by parameter: on a GPU a handful of multi-tensor kernels instead of ~10
// launches per parameter. Parameters without a gradient are skipped, as
// AdamW::step skips them. InvalidArgument for amsgrad (not implemented;
// nothing here sets it) or a sparse gradient; nothing changes then.
// StageOptimizer::Step uses it for parameters on a GPU only: on the CPU
// each list op streams the whole stage through the cache where the
// per-parameter step keeps one parameter's four tensors hot, and the list
// step measured slower (optimizer_benchmark, model/README.md).
absl::Status ForeachAdamWStep(torch::optim::AdamW& adamw);

// Scales gradients so their global L2 norm is at most max_norm; returns the
// norm before scaling.
double ClipGradNorm(const std::vector<at::Tensor>& params, double max_norm);

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_OPTIMIZER_H_
