#include "model/stage_executor.h"

#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/autograd.h>

#include <exception>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/torch_compat.h"
#include "model/torch_guard.h"

namespace skipswarm::model {
namespace {

std::string ShapeString(const at::Tensor& t) {
  return absl::StrCat("[", absl::StrJoin(t.sizes(), ","), "]");
}

// Enables bf16 autocast for the scope when asked for; a no-op otherwise.
class AutocastScope {
 public:
  AutocastScope(bool enable, const at::Device& device)
      : enabled_(enable), type_(device.type()) {
    if (!enabled_) return;
    prev_ = compat::IsAutocastEnabled(type_);
    compat::SetAutocast(type_, true, at::kBFloat16);
  }
  ~AutocastScope() {
    if (!enabled_) return;
    compat::SetAutocast(type_, prev_, at::kBFloat16);
    at::autocast::clear_cache();
  }

 private:
  bool enabled_;
  at::DeviceType type_;
  bool prev_ = false;
};

}  // namespace

absl::StatusOr<at::Device> ParseDevice(const std::string& device) {
  try {
    at::Device d(device);
    if (d.is_cuda() && !at::hasCUDA()) {
      return absl::UnavailableError(absl::StrCat(
          "device '", device, "': this libtorch build has no CUDA (use --device=cpu)"));
    }
    if (!d.is_cpu() && !d.is_cuda()) {
      return absl::InvalidArgumentError(absl::StrCat("device '", device, "' is not supported"));
    }
    return d;
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("bad device '", device, "'"));
  }
}

absl::StatusOr<at::Device> ApplyRuntimeOptions(const RuntimeOptions& runtime) {
  absl::StatusOr<at::Device> device = ParseDevice(runtime.device);
  if (!device.ok()) return device.status();
  int threads = runtime.threads;
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  at::set_num_threads(threads);
  return device;
}

absl::StatusOr<std::unique_ptr<StageExecutor>> StageExecutor::Create(
    const ModelConfig& config, int stage, const RuntimeOptions& runtime) {
  absl::Status valid = config.Validate();
  if (!valid.ok()) return valid;
  if (stage < 0 || stage >= config.num_stages) {
    return absl::InvalidArgumentError(
        absl::StrCat("stage ", stage, " is not in [0, ", config.num_stages, ")"));
  }
  absl::StatusOr<at::Device> device = ParseDevice(runtime.device);
  if (!device.ok()) return device.status();
  return TorchGuard("building stage", [&]() -> absl::StatusOr<std::unique_ptr<StageExecutor>> {
    auto module = std::make_shared<StageModule>(config, stage);
    module->MoveTo(*device);
    return std::unique_ptr<StageExecutor>(new StageExecutor(std::move(module), *device, runtime));
  });
}

StageExecutor::StageExecutor(std::shared_ptr<StageModule> module, at::Device device,
                             const RuntimeOptions& runtime)
    : module_(std::move(module)), device_(device), runtime_(runtime) {}

absl::Status StageExecutor::CheckActivation(const at::Tensor& x, const char* what) const {
  const ModelConfig& c = config();
  if (!x.defined()) return absl::InvalidArgumentError(absl::StrCat(what, ": undefined tensor"));
  if (!at::isFloatingType(x.scalar_type())) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": dtype ",
                                                   c10::toString(x.scalar_type()),
                                                   " is not floating point"));
  }
  if (x.dim() != 3 || x.size(0) < 1 || x.size(1) < 1 || x.size(1) > c.seq_len ||
      x.size(2) != c.d_model) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": shape ", ShapeString(x), " is not [B>=1, 1<=T<=", c.seq_len,
                     ", ", c.d_model, "]"));
  }
  return absl::OkStatus();
}

absl::StatusOr<at::Tensor> StageExecutor::Start(uint64_t mb, const at::Tensor& tokens,
                                                Mode mode) {
  if (stage() != 0) return absl::FailedPreconditionError("Start() needs the data stage (0)");
  const ModelConfig& c = config();
  if (!tokens.defined() || at::isFloatingType(tokens.scalar_type()) ||
      tokens.scalar_type() == at::kBool || tokens.dim() != 2 || tokens.size(0) < 1 ||
      tokens.size(1) < 1 || tokens.size(1) > c.seq_len) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tokens must be an integer [B>=1, 1<=T<=", c.seq_len, "] tensor, got ",
        tokens.defined() ? ShapeString(tokens) : "undefined"));
  }
  if (mode == Mode::kTrain && stash_.count(mb)) {
    return absl::FailedPreconditionError(absl::StrCat("micro-batch ", mb, " already pending"));
  }
  return TorchGuard("Start", [&]() -> absl::StatusOr<at::Tensor> {
    at::Tensor t = tokens.to(device_, at::kLong);
    if (t.min().item<int64_t>() < 0 || t.max().item<int64_t>() >= c.vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("token ids must be in [0, ", c.vocab_size, ")"));
    }
    c10::AutoGradMode grad(mode == Mode::kTrain);
    AutocastScope autocast(runtime_.bf16_autocast, device_);
    at::Tensor out = module_->RunBlocks(module_->Embed(t)).to(at::kFloat);
    if (mode == Mode::kTrain) stash_[mb] = Stash{at::Tensor(), out};
    return out.detach();
  });
}

absl::StatusOr<at::Tensor> StageExecutor::Forward(uint64_t mb, const at::Tensor& input,
                                                  Mode mode) {
  if (stage() == 0) {
    return absl::FailedPreconditionError("Forward() is for stages > 0; stage 0 uses Start()");
  }
  absl::Status ok = CheckActivation(input, "Forward input");
  if (!ok.ok()) return ok;
  if (mode == Mode::kTrain && stash_.count(mb)) {
    return absl::FailedPreconditionError(absl::StrCat("micro-batch ", mb, " already pending"));
  }
  return TorchGuard("Forward", [&]() -> absl::StatusOr<at::Tensor> {
    c10::AutoGradMode grad(mode == Mode::kTrain);
    at::Tensor x = input.to(device_, at::kFloat).detach();
    if (mode == Mode::kTrain) x.requires_grad_(true);
    AutocastScope autocast(runtime_.bf16_autocast, device_);
    at::Tensor out = module_->RunBlocks(x).to(at::kFloat);
    if (mode == Mode::kTrain) stash_[mb] = Stash{x, out};
    return out.detach();
  });
}

absl::StatusOr<TailResult> StageExecutor::Tail(const at::Tensor& activation,
                                               const at::Tensor& targets, double loss_scale,
                                               Mode mode) {
  if (stage() != 0) return absl::FailedPreconditionError("Tail() needs the data stage (0)");
  absl::Status ok = CheckActivation(activation, "Tail input");
  if (!ok.ok()) return ok;
  if (!targets.defined() || at::isFloatingType(targets.scalar_type()) || targets.dim() != 2 ||
      targets.size(0) != activation.size(0) || targets.size(1) != activation.size(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("targets must be integer ", "[", activation.size(0), ",",
                     activation.size(1), "], got ",
                     targets.defined() ? ShapeString(targets) : "undefined"));
  }
  return TorchGuard("Tail", [&]() -> absl::StatusOr<TailResult> {
    at::Tensor y = targets.to(device_, at::kLong);
    const int64_t vocab = config().vocab_size;
    if (y.min().item<int64_t>() < 0 || y.max().item<int64_t>() >= vocab) {
      return absl::InvalidArgumentError(absl::StrCat("targets must be in [0, ", vocab, ")"));
    }
    c10::AutoGradMode grad(mode == Mode::kTrain);
    at::Tensor x = activation.to(device_, at::kFloat).detach();
    if (mode == Mode::kTrain) x.requires_grad_(true);
    at::Tensor loss;
    {
      AutocastScope autocast(runtime_.bf16_autocast, device_);
      loss = module_->Loss(x, y);
    }
    TailResult result;
    result.loss = loss.item<double>();
    if (mode == Mode::kTrain) {
      (loss * loss_scale).backward();
      result.grad_input = x.grad();
    }
    return result;
  });
}

absl::StatusOr<at::Tensor> StageExecutor::Backward(uint64_t mb, const at::Tensor& grad_output,
                                                   bool train_parameters) {
  auto it = stash_.find(mb);
  if (it == stash_.end()) {
    return absl::NotFoundError(absl::StrCat("stage ", stage(), ": micro-batch ", mb,
                                            " has no pending forward"));
  }
  const at::Tensor& out = it->second.output;
  if (!grad_output.defined() || !at::isFloatingType(grad_output.scalar_type()) ||
      !grad_output.sizes().equals(out.sizes())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Backward: gradient shape ",
        grad_output.defined() ? ShapeString(grad_output) : "undefined",
        " does not match the output ", ShapeString(out)));
  }
  Stash stash = std::move(it->second);
  stash_.erase(it);
  return TorchGuard("Backward", [&]() -> absl::StatusOr<at::Tensor> {
    if (!train_parameters) {
      // Only d(output)/d(input): autograd prunes the weights' part of the graph.
      if (!stash.input.defined()) return at::Tensor();
      return torch::autograd::grad({stash.output}, {stash.input},
                                   {grad_output.to(device_, at::kFloat)})[0];
    }
    stash.output.backward(grad_output.to(device_, at::kFloat));
    ++visits_;
    if (!stash.input.defined()) return at::Tensor();
    return stash.input.grad();
  });
}

absl::StatusOr<at::Tensor> StageExecutor::RecomputeInputGradient(const at::Tensor& input,
                                                                 const at::Tensor& grad_output) {
  if (stage() == 0) {
    return absl::FailedPreconditionError("RecomputeInputGradient is for stages > 0");
  }
  absl::Status ok = CheckActivation(input, "RecomputeInputGradient input");
  if (!ok.ok()) return ok;
  if (!grad_output.defined() || !at::isFloatingType(grad_output.scalar_type()) ||
      !grad_output.sizes().equals(input.sizes())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "RecomputeInputGradient: gradient shape ",
        grad_output.defined() ? ShapeString(grad_output) : "undefined",
        " does not match the input ", ShapeString(input)));
  }
  return TorchGuard("RecomputeInputGradient", [&]() -> absl::StatusOr<at::Tensor> {
    c10::AutoGradMode grad(true);
    at::Tensor x = input.to(device_, at::kFloat).detach().requires_grad_(true);
    at::Tensor out;
    {
      AutocastScope autocast(runtime_.bf16_autocast, device_);
      out = module_->RunBlocks(x).to(at::kFloat);
    }
    // As Backward without train_parameters: autograd::grad fills no .grad.
    return torch::autograd::grad({out}, {x}, {grad_output.to(device_, at::kFloat)})[0];
  });
}

bool StageExecutor::Discard(uint64_t mb) { return stash_.erase(mb) > 0; }

void StageExecutor::ZeroGrad() {
  for (auto& p : module_->parameters()) {
    if (p.grad().defined()) p.mutable_grad() = at::Tensor();
  }
  visits_ = 0;
}

}  // namespace skipswarm::model
