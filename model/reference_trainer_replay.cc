// ReferenceTrainer::RunIteration over given micro-batches and routes: the
// one training step of the reference trainer. RunIteration() (in
// reference_trainer.cc) draws its own data order and routes and calls it;
// `skipswarm train-ref --routes_file` calls it with a swarm's recorded
// routes. The step is the visit-weighted, clipped AdamW step.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/reference_trainer.h"

namespace skipswarm::model {

absl::StatusOr<IterationStats> ReferenceTrainer::RunIteration(
    const std::vector<RoutedMicroBatch>& mbs) {
  if (mbs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("iteration ", iteration_, " has no micro-batches to replay"));
  }
  const int stages = pipe_->num_stages();
  IterationStats stats;
  stats.iteration = iteration_;
  double loss_sum = 0;
  for (const RoutedMicroBatch& r : mbs) {
    MicroBatch batch = sampler_->Get(r.index);
    absl::StatusOr<double> loss = pipe_->TrainMicroBatch(r.index, r.route, batch.tokens,
                                                         batch.targets, 1.0, r.frozen);
    if (!loss.ok()) {
      return absl::Status(loss.status().code(),
                          absl::StrCat("iteration ", iteration_, ", micro-batch ", r.index, ": ",
                                       loss.status().message()));
    }
    loss_sum += *loss;
    stats.tokens += batch.tokens.numel();
  }
  stats.loss = loss_sum / static_cast<double>(mbs.size());
  for (int s = 0; s < stages; ++s) {
    StageExecutor& exec = pipe_->stage(s);
    stats.visits.push_back(exec.visits());
    SS_ASSIGN_OR_RETURN(StepStats step,
                        optimizers_[s]->Step(iteration_, static_cast<double>(exec.visits())));
    exec.ZeroGrad();
    stats.lr = step.lr;
    stats.max_grad_norm = std::max(stats.max_grad_norm, step.grad_norm);
  }
  ++iteration_;
  return stats;
}

}  // namespace skipswarm::model
