#include "model/local_pipeline.h"

#include <algorithm>
#include <exception>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/route.h"
#include "model/torch_guard.h"

namespace skipswarm::model {

absl::StatusOr<std::unique_ptr<LocalPipeline>> LocalPipeline::Create(
    const ModelConfig& config, const RuntimeOptions& runtime) {
  SS_RETURN_IF_ERROR(config.Validate());
  std::vector<std::unique_ptr<StageExecutor>> executors;
  for (int s = 0; s < config.num_stages; ++s) {
    SS_ASSIGN_OR_RETURN(auto exec, StageExecutor::Create(config, s, runtime));
    executors.push_back(std::move(exec));
  }
  return std::unique_ptr<LocalPipeline>(new LocalPipeline(config, std::move(executors)));
}

absl::StatusOr<double> LocalPipeline::TrainMicroBatch(uint64_t mb, const std::vector<int>& route,
                                                      const at::Tensor& tokens,
                                                      const at::Tensor& targets,
                                                      double loss_scale,
                                                      const std::vector<int>& frozen) {
  SS_RETURN_IF_ERROR(ValidateRoute(route, num_stages()));
  for (int s : frozen) {
    if (s <= 0 || s >= num_stages()) {
      return absl::InvalidArgumentError(
          absl::StrCat("frozen stage ", s, " is not in [1, ", num_stages(), ")"));
    }
  }
  // On any error, drop what earlier hops stashed so the executors stay clean.
  auto cleanup = [&](absl::Status status) {
    for (int s : route) executors_[s]->Discard(mb);
    return status;
  };
  absl::StatusOr<at::Tensor> x = executors_[0]->Start(mb, tokens);
  if (!x.ok()) return cleanup(x.status());
  for (size_t i = 1; i < route.size(); ++i) {
    x = executors_[route[i]]->Forward(mb, *x);
    if (!x.ok()) return cleanup(x.status());
  }
  absl::StatusOr<TailResult> tail = executors_[0]->Tail(*x, targets, loss_scale);
  if (!tail.ok()) return cleanup(tail.status());
  at::Tensor grad = tail->grad_input;
  for (size_t i = route.size(); i-- > 0;) {
    const bool train = std::find(frozen.begin(), frozen.end(), route[i]) == frozen.end();
    absl::StatusOr<at::Tensor> g = executors_[route[i]]->Backward(mb, grad, train);
    if (!g.ok()) return cleanup(g.status());
    grad = *g;
  }
  return tail->loss;
}

absl::StatusOr<double> LocalPipeline::EvalMicroBatch(const std::vector<int>& route,
                                                     const at::Tensor& tokens,
                                                     const at::Tensor& targets,
                                                     double residual_scale) {
  SS_RETURN_IF_ERROR(ValidateRoute(route, num_stages()));
  SS_ASSIGN_OR_RETURN(at::Tensor x, executors_[0]->Start(0, tokens, Mode::kEval));
  for (size_t i = 1; i < route.size(); ++i) {
    SS_ASSIGN_OR_RETURN(at::Tensor y, executors_[route[i]]->Forward(0, x, Mode::kEval));
    if (residual_scale == 1.0) {
      x = y;
    } else {
      absl::Status scaled = TorchGuard("residual scaling", [&]() -> absl::Status {
        x = x + residual_scale * (y - x);
        return absl::OkStatus();
      });
      if (!scaled.ok()) return scaled;
    }
  }
  SS_ASSIGN_OR_RETURN(TailResult tail, executors_[0]->Tail(x, targets, 1.0, Mode::kEval));
  return tail.loss;
}

void LocalPipeline::ZeroGrad() {
  for (auto& e : executors_) e->ZeroGrad();
}

at::Tensor MonolithicLoss(const std::vector<StageModule*>& stages, const std::vector<int>& route,
                          const at::Tensor& tokens, const at::Tensor& targets) {
  at::Tensor x = stages[0]->RunBlocks(stages[0]->Embed(tokens));
  for (size_t i = 1; i < route.size(); ++i) x = stages[route[i]]->RunBlocks(x);
  return stages[0]->Loss(x, targets);
}

}  // namespace skipswarm::model
