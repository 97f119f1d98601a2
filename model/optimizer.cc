#include "model/optimizer.h"

#include <c10/core/GradMode.h>

#include <cmath>
#include <exception>

#include "absl/strings/str_cat.h"
#include "model/torch_guard.h"

namespace skipswarm::model {

StageOptimizer::StageOptimizer(StageModule& module, const OptimizerOptions& options)
    : module_(module), options_(options) {
  std::vector<at::Tensor> decay, no_decay;
  for (auto& p : module.parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  auto make = [&](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(options.peak_lr)
            .betas({options.beta1, options.beta2})
            .eps(options.eps)
            .weight_decay(wd));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, make(options.weight_decay));
  if (!no_decay.empty()) groups.emplace_back(no_decay, make(0.0));
  adamw_ = std::make_unique<torch::optim::AdamW>(groups, torch::optim::AdamWOptions(options.peak_lr));
}

double ClipGradNorm(const std::vector<at::Tensor>& params, double max_norm) {
  c10::NoGradGuard no_grad;
  // Each parameter's squared norm stays on its device (in double, as the
  // sum is); one read at the end. A read per parameter stalled a GPU's
  // queue once per parameter (hundreds of times a step).
  std::vector<at::Tensor> squares;
  squares.reserve(params.size());
  for (const auto& p : params) {
    if (p.grad().defined()) squares.push_back(p.grad().to(at::kDouble).pow(2).sum());
  }
  double sq = 0;
  if (!squares.empty()) {
    const at::Tensor all = at::stack(squares).to(at::kCPU);
    const double* v = all.data_ptr<double>();
    for (int64_t i = 0; i < all.numel(); ++i) sq += v[i];  // in order, as before
  }
  const double norm = std::sqrt(sq);
  if (max_norm > 0 && norm > max_norm) {
    const double scale = max_norm / (norm + 1e-6);
    for (const auto& p : params) {
      if (p.grad().defined()) p.grad().mul_(scale);
    }
  }
  return norm;
}

absl::StatusOr<StepStats> StageOptimizer::Step(int64_t step, double visits) {
  StepStats stats;
  stats.lr = LearningRate(options_, step);
  return TorchGuard("optimizer step", [&]() -> absl::StatusOr<StepStats> {
    std::vector<at::Tensor> params = module_.parameters();
    if (visits <= 0) {
      adamw_->zero_grad();
      return stats;
    }
    {
      c10::NoGradGuard no_grad;
      for (auto& p : params) {
        if (p.grad().defined()) p.grad().div_(visits);
      }
    }
    stats.grad_norm = ClipGradNorm(params, options_.grad_clip);
    if (!std::isfinite(stats.grad_norm)) {
      adamw_->zero_grad();
      return absl::InvalidArgumentError(absl::StrCat(
          "stage ", module_.stage(), ": non-finite gradient norm at step ", step));
    }
    for (auto& group : adamw_->param_groups()) group.options().set_lr(stats.lr);
    adamw_->step();
    adamw_->zero_grad();
    stats.stepped = true;
    return stats;
  });
}

at::Tensor FlattenGradients(StageModule& module) {
  std::vector<at::Tensor> parts;
  for (auto& p : module.parameters()) {
    at::Tensor g = p.grad().defined() ? p.grad() : at::zeros_like(p);
    parts.push_back(g.detach().to(at::kCPU, at::kFloat).reshape({-1}));
  }
  return at::cat(parts);
}

absl::Status SetGradientsFromFlat(StageModule& module, const at::Tensor& flat) {
  std::vector<at::Tensor> params = module.parameters();
  int64_t total = 0;
  for (auto& p : params) total += p.numel();
  if (!flat.defined() || flat.dim() != 1 || flat.numel() != total ||
      !at::isFloatingType(flat.scalar_type())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "stage ", module.stage(), ": flat gradient must be a float vector of ", total,
        " elements"));
  }
  return TorchGuard("set gradients", [&]() -> absl::Status {
    c10::NoGradGuard no_grad;
    int64_t at = 0;
    for (auto& p : params) {
      at::Tensor g = flat.slice(0, at, at + p.numel()).view(p.sizes()).to(p.device(), p.dtype());
      p.mutable_grad() = g.clone();
      at += p.numel();
    }
    return absl::OkStatus();
  });
}

}  // namespace skipswarm::model
