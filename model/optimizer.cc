#include "model/optimizer.h"

#include <c10/core/GradMode.h>

#include <cmath>
#include <exception>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "model/torch_compat.h"
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

// Note [Foreach AdamW]. Per element this is AdamW::step's sequence, with
// the same scalars (double, as AdamWOptions holds them):
//   p *= 1 - lr wd;  m = m beta1 + (1 - beta1) g;  v = v beta2 + (1 - beta2) g g;
//   p += -(lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps),  bc_i = 1 - beta_i^step.
// On the CPU each _foreach_ op runs the per-tensor kernel on every list
// member, so the bytes are AdamW::step's (optimizer_test checks them); on a
// GPU the fused kernels compute in float as the per-tensor ones do.
// Parameters are grouped by their step count (bc1 and bc2 depend on it):
// one group in practice, more only after a parameter missed a step.
absl::Status ForeachAdamWStep(torch::optim::AdamW& adamw) {
  using torch::optim::AdamWOptions;
  using torch::optim::AdamWParamState;
  c10::NoGradGuard no_grad;
  for (auto& group : adamw.param_groups()) {
    const auto& o = static_cast<const AdamWOptions&>(group.options());
    if (o.amsgrad()) return absl::InvalidArgumentError("ForeachAdamWStep: amsgrad is not supported");
    for (const at::Tensor& p : group.params()) {
      if (p.grad().defined() && p.grad().is_sparse()) {
        return absl::InvalidArgumentError("ForeachAdamWStep: sparse gradients are not supported");
      }
    }
  }
  for (auto& group : adamw.param_groups()) {
    const auto& o = static_cast<const AdamWOptions&>(group.options());
    struct Lists {
      std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs;
    };
    std::map<int64_t, Lists> by_step;  // the step number each parameter takes now
    for (const at::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& states = adamw.state();
      auto key = compat::OptimizerStateKey(p);
      auto it = states.find(key);
      if (it == states.end()) {
        auto fresh = std::make_unique<AdamWParamState>();
        fresh->step(0);
        fresh->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
        fresh->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
        it = states.emplace(key, std::move(fresh)).first;
      }
      auto& state = static_cast<AdamWParamState&>(*it->second);
      state.step(state.step() + 1);
      Lists& l = by_step[state.step()];
      l.params.push_back(p);
      l.grads.push_back(p.grad());
      l.exp_avgs.push_back(state.exp_avg());
      l.exp_avg_sqs.push_back(state.exp_avg_sq());
    }
    const double beta1 = std::get<0>(o.betas());
    const double beta2 = std::get<1>(o.betas());
    for (auto& [step, l] : by_step) {
      const double bias_correction1 = 1 - std::pow(beta1, step);
      const double bias_correction2 = 1 - std::pow(beta2, step);
      if (o.weight_decay() != 0) at::_foreach_mul_(l.params, 1 - o.lr() * o.weight_decay());
      at::_foreach_mul_(l.exp_avgs, beta1);
      at::_foreach_add_(l.exp_avgs, l.grads, 1 - beta1);
      at::_foreach_mul_(l.exp_avg_sqs, beta2);
      at::_foreach_addcmul_(l.exp_avg_sqs, l.grads, l.grads, 1 - beta2);
      std::vector<at::Tensor> denoms = at::_foreach_sqrt(l.exp_avg_sqs);
      at::_foreach_div_(denoms, std::sqrt(bias_correction2));
      at::_foreach_add_(denoms, o.eps());
      at::_foreach_addcdiv_(l.params, l.exp_avgs, denoms, -(o.lr() / bias_correction1));
    }
  }
  return absl::OkStatus();
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
    // Note [Foreach AdamW]: the list step where it is cheaper (a GPU).
    if (!params.empty() && params.front().is_cuda()) {
      absl::Status stepped = ForeachAdamWStep(*adamw_);
      if (!stepped.ok()) {
        adamw_->zero_grad();
        return stepped;
      }
    } else {
      adamw_->step();
    }
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
