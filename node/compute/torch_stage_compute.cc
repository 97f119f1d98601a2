#include "node/compute/torch_stage_compute.h"

#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "model/checkpoint.h"
#include "model/stage_executor.h"
#include "model/torch_guard.h"

namespace skipswarm::node {

struct TorchStageCompute::Targets {
  at::Tensor targets;
};

namespace {

absl::StatusOr<at::Tensor> TokensTensor(const std::vector<int64_t>& ids, int64_t samples,
                                        int64_t seq, const char* what) {
  if (samples < 1 || seq < 1 || static_cast<int64_t>(ids.size()) != samples * seq) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", ids.size(), " ids for a [",
                                                   samples, ", ", seq, "] micro-batch"));
  }
  return at::from_blob(const_cast<int64_t*>(ids.data()), {samples, seq}, at::kLong).clone();
}

uint64_t HashBytes(uint64_t h, const void* data, size_t n) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  for (; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

}  // namespace

model::TensorMeta FromProto(const proto::TensorMeta& meta) {
  model::TensorMeta m;
  m.dtype = static_cast<model::WireDType>(meta.dtype());
  m.shape.assign(meta.shape().begin(), meta.shape().end());
  m.codec = static_cast<model::Codec>(meta.codec());
  m.payload_bytes = meta.payload_bytes();
  m.payload_crc32c = meta.payload_crc32c();
  m.block_size = meta.block_size();
  return m;
}

proto::TensorMeta ToProto(const model::TensorMeta& meta) {
  proto::TensorMeta m;
  m.set_dtype(static_cast<proto::DType>(meta.dtype));
  for (int64_t d : meta.shape) m.add_shape(d);
  m.set_codec(static_cast<proto::Codec>(meta.codec));
  m.set_payload_bytes(meta.payload_bytes);
  m.set_payload_crc32c(meta.payload_crc32c);
  m.set_block_size(meta.block_size);
  return m;
}

absl::StatusOr<std::unique_ptr<TorchStageCompute>> TorchStageCompute::Create(
    const Options& options, TaskRunner* runner) {
  absl::StatusOr<std::unique_ptr<model::StageExecutor>> executor =
      model::StageExecutor::Create(options.model, options.stage, options.runtime);
  if (options.frozen && options.stage == 0) {
    return absl::InvalidArgumentError("stage 0 cannot be frozen (it ends every micro-batch)");
  }
  if (!executor.ok()) return executor.status();
  return model::TorchGuard("optimiser", [&]() -> absl::StatusOr<std::unique_ptr<TorchStageCompute>> {
    return std::unique_ptr<TorchStageCompute>(
        new TorchStageCompute(options, runner, std::move(executor).value()));
  });
}

TorchStageCompute::TorchStageCompute(const Options& options, TaskRunner* runner,
                                     std::unique_ptr<model::StageExecutor> executor)
    : options_(options), runner_(runner), executor_(std::move(executor)) {
  std::vector<at::Tensor> params = executor_->module().parameters();
  for (const at::Tensor& p : params) num_params_ += p.numel();
  optimizer_ = std::make_unique<model::StageOptimizer>(executor_->module(), options.optimizer);
  if (options.frozen) {
    for (at::Tensor& p : params) p.requires_grad_(false);
  } else {
    if (options.averaging.outer_every > 1) {
      outer_ = std::make_unique<model::OuterOptimizer>(
          options.averaging, model::FlattenParameters(executor_->module()));
    }
    if (model::IsLossy(options.averaging.codec)) {
      // The stage is the seed: replicas draw the same PowerSGD warm start.
      codec_ = std::make_unique<model::AveragingCodec>(options.averaging.codec, num_params_,
                                                       static_cast<uint64_t>(options.stage));
    }
  }
}

TorchStageCompute::~TorchStageCompute() = default;

void TorchStageCompute::Start(uint64_t mb, MicroBatchData data, TensorDone done) {
  runner_->Post([this, mb, data = std::move(data), done = std::move(done)]() mutable {
    absl::StatusOr<WireTensor> out = DoStart(mb, data);
    done(std::move(out));
  });
}

void TorchStageCompute::Forward(uint64_t mb, WireTensor input, TensorDone done) {
  runner_->Post([this, mb, input = std::move(input), done = std::move(done)]() mutable {
    absl::StatusOr<WireTensor> out = DoForward(mb, input);
    done(std::move(out));
  });
}

void TorchStageCompute::SketchForward(WireTensor input, uint64_t seed, SketchDone done) {
  runner_->Post([this, input = std::move(input), seed, done = std::move(done)]() mutable {
    absl::StatusOr<model::OutputSketch> out = DoSketchForward(input, seed);
    done(std::move(out));
  });
}

void TorchStageCompute::SketchBackward(WireTensor input, WireTensor grad_output, uint64_t seed,
                                       SketchDone done) {
  runner_->Post([this, input = std::move(input), grad = std::move(grad_output), seed,
                 done = std::move(done)]() mutable {
    absl::StatusOr<model::OutputSketch> out = DoSketchBackward(input, grad, seed);
    done(std::move(out));
  });
}

void TorchStageCompute::Tail(uint64_t mb, WireTensor activation, TailDone done) {
  runner_->Post([this, mb, activation = std::move(activation), done = std::move(done)]() mutable {
    absl::StatusOr<TailOutput> out = DoTail(mb, activation);
    done(std::move(out));
  });
}

void TorchStageCompute::Backward(uint64_t mb, WireTensor grad_output, TensorDone done) {
  runner_->Post([this, mb, grad = std::move(grad_output), done = std::move(done)]() mutable {
    absl::StatusOr<WireTensor> out = DoBackward(mb, grad);
    done(std::move(out));
  });
}

namespace {

absl::StatusOr<WireTensor> Encode(const at::Tensor& t, const model::EncodeOptions& encode) {
  absl::StatusOr<model::EncodedTensor> enc = model::EncodeTensor(t, encode);
  if (!enc.ok()) return enc.status();
  WireTensor out;
  out.meta = ToProto(enc->meta);
  out.payload = absl::Cord(std::move(enc->payload));
  return out;
}

absl::StatusOr<at::Tensor> DecodeActivation(const WireTensor& in, const model::ModelConfig& c,
                                            int64_t max_samples) {
  model::DecodeExpectations want;
  want.dtype = model::WireDType::kFloat32;
  want.shape = {-1, -1, c.d_model};
  want.max_dim = std::max<int64_t>({max_samples, c.seq_len, c.d_model});
  // A frame's payload arrives as one Cord chunk (up to the transport's chunk
  // size): decode straight from it. A payload in pieces is flattened first.
  const model::TensorMeta meta = FromProto(in.meta);
  if (auto flat = in.payload.TryFlat(); flat.has_value()) {
    return model::DecodeTensor(meta, *flat, want);
  }
  const std::string copy(in.payload);
  return model::DecodeTensor(meta, absl::string_view(copy), want);
}

}  // namespace

absl::StatusOr<WireTensor> TorchStageCompute::DoStart(uint64_t mb, const MicroBatchData& data) {
  if (options_.stage != 0) return absl::FailedPreconditionError("Start needs stage 0");
  return model::TorchGuard("Start", [&]() -> absl::StatusOr<WireTensor> {
    absl::StatusOr<at::Tensor> tokens = TokensTensor(data.tokens, data.samples, data.seq, "tokens");
    if (!tokens.ok()) return tokens.status();
    absl::StatusOr<at::Tensor> targets =
        TokensTensor(data.targets, data.samples, data.seq, "targets");
    if (!targets.ok()) return targets.status();
    absl::MutexLock lock(&mu_);
    if (targets_.contains(mb)) {
      return absl::AlreadyExistsError(absl::StrCat("micro-batch ", mb, " already started"));
    }
    absl::StatusOr<at::Tensor> x = executor_->Start(mb, *tokens);
    if (!x.ok()) return x.status();
    targets_[mb] = std::make_shared<Targets>(Targets{*std::move(targets)});
    return Encode(*x, options_.encode);
  });
}

absl::StatusOr<WireTensor> TorchStageCompute::DoForward(uint64_t mb, const WireTensor& input) {
  return model::TorchGuard("Forward", [&]() -> absl::StatusOr<WireTensor> {
    absl::StatusOr<at::Tensor> x = DecodeActivation(input, options_.model, options_.max_samples);
    if (!x.ok()) return x.status();
    absl::MutexLock lock(&mu_);
    absl::StatusOr<at::Tensor> y = executor_->Forward(mb, *x);
    if (!y.ok()) return y.status();
    return Encode(*y, options_.encode);
  });
}

// Note [Verify-only forward]
// Verified compute (Note [Output sketch] in model/output_sketch.h) has a
// second replica Y recompute a forward that replica X ran for training. Y's
// run must leave Y exactly as it was: the executor's kEval mode runs the
// same blocks with autograd off and keeps no stash (so no pending MB, no
// memory held for a backward, no visit, no gradient), and nothing here
// touches the optimiser or the step. The maths equal kTrain's (the blocks
// have no dropout and no train-only layer), so with equal weights Y's output
// equals what X computed up to the device's rounding. The sketch is of the
// float32 output before any codec: the checker's bound covers X's codec
// (Note [Codec error bound]). Y's weights must be X's: the caller sends a
// check only within one iteration, before either replica steps.
absl::StatusOr<model::OutputSketch> TorchStageCompute::DoSketchForward(const WireTensor& input,
                                                                       uint64_t seed) {
  if (options_.stage == 0) {
    return absl::FailedPreconditionError("SketchForward needs a stage > 0 (stage 0 starts)");
  }
  return model::TorchGuard("SketchForward", [&]() -> absl::StatusOr<model::OutputSketch> {
    absl::StatusOr<at::Tensor> x = DecodeActivation(input, options_.model, options_.max_samples);
    if (!x.ok()) return x.status();
    at::Tensor y;
    {
      absl::MutexLock lock(&mu_);
      // kEval ignores the id (nothing is keyed by it).
      absl::StatusOr<at::Tensor> out = executor_->Forward(0, *x, model::Mode::kEval);
      if (!out.ok()) return out.status();
      y = out->to(at::kCPU, at::kFloat).contiguous();
    }
    return model::SketchOutput(absl::Span<const float>(y.data_ptr<float>(), y.numel()),
                               {y.sizes().begin(), y.sizes().end()}, seed);
  });
}

// Note [Verify-only forward] applies: RecomputeInputGradient keeps no stash
// and accumulates no parameter gradient; the weights and the step are not
// touched.
absl::StatusOr<model::OutputSketch> TorchStageCompute::DoSketchBackward(
    const WireTensor& input, const WireTensor& grad_output, uint64_t seed) {
  if (options_.stage == 0) {
    return absl::FailedPreconditionError("SketchBackward needs a stage > 0");
  }
  return model::TorchGuard("SketchBackward", [&]() -> absl::StatusOr<model::OutputSketch> {
    absl::StatusOr<at::Tensor> x = DecodeActivation(input, options_.model, options_.max_samples);
    if (!x.ok()) return x.status();
    absl::StatusOr<at::Tensor> g =
        DecodeActivation(grad_output, options_.model, options_.max_samples);
    if (!g.ok()) return g.status();
    at::Tensor gx;
    {
      absl::MutexLock lock(&mu_);
      absl::StatusOr<at::Tensor> out = executor_->RecomputeInputGradient(*x, *g);
      if (!out.ok()) return out.status();
      gx = out->to(at::kCPU, at::kFloat).contiguous();
    }
    return model::SketchOutput(absl::Span<const float>(gx.data_ptr<float>(), gx.numel()),
                               {gx.sizes().begin(), gx.sizes().end()}, seed);
  });
}

absl::StatusOr<TailOutput> TorchStageCompute::DoTail(uint64_t mb, const WireTensor& activation) {
  return model::TorchGuard("Tail", [&]() -> absl::StatusOr<TailOutput> {
    absl::StatusOr<at::Tensor> x =
        DecodeActivation(activation, options_.model, options_.max_samples);
    if (!x.ok()) return x.status();
    absl::MutexLock lock(&mu_);
    auto it = targets_.find(mb);
    if (it == targets_.end()) {
      return absl::NotFoundError(absl::StrCat("tail of micro-batch ", mb, " that was not started"));
    }
    absl::StatusOr<model::TailResult> r = executor_->Tail(*x, it->second->targets, 1.0);
    if (!r.ok()) return r.status();
    targets_.erase(it);
    absl::StatusOr<WireTensor> g = Encode(r->grad_input, options_.encode);
    if (!g.ok()) return g.status();
    return TailOutput{r->loss, *std::move(g)};
  });
}

absl::StatusOr<WireTensor> TorchStageCompute::DoBackward(uint64_t mb, const WireTensor& grad) {
  return model::TorchGuard("Backward", [&]() -> absl::StatusOr<WireTensor> {
    absl::StatusOr<at::Tensor> g = DecodeActivation(grad, options_.model, options_.max_samples);
    if (!g.ok()) return g.status();
    absl::MutexLock lock(&mu_);
    absl::StatusOr<at::Tensor> gx = executor_->Backward(mb, *g, !options_.frozen);
    if (!gx.ok()) return gx.status();
    targets_.erase(mb);
    if (!gx->defined()) return WireTensor{};
    return Encode(*gx, options_.encode);
  });
}

bool TorchStageCompute::Discard(uint64_t mb) {
  absl::MutexLock lock(&mu_);
  targets_.erase(mb);
  return executor_->Discard(mb);
}

size_t TorchStageCompute::pending() const {
  absl::MutexLock lock(&mu_);
  return executor_->pending();
}

absl::StatusOr<GradientSum> TorchStageCompute::TakeGradients() {
  absl::MutexLock lock(&mu_);
  return model::TorchGuard("TakeGradients", [&]() -> absl::StatusOr<GradientSum> {
    mu_.AssertHeld();  // the lambda runs under the lock above
    GradientSum sum;
    sum.visits = executor_->visits();
    // Appended piece by piece: no zero fill of what the gradients overwrite.
    sum.flat.reserve(num_params_);
    for (const at::Tensor& p : executor_->module().parameters()) {
      const at::Tensor& grad = p.grad();
      if (grad.defined()) {
        at::Tensor g = grad.detach().to(at::kCPU, at::kFloat).contiguous();
        const float* data = g.data_ptr<float>();
        sum.flat.insert(sum.flat.end(), data, data + g.numel());
      } else {
        sum.flat.insert(sum.flat.end(), p.numel(), 0.0f);
      }
    }
    return sum;
  });
}

absl::StatusOr<UpdateStats> TorchStageCompute::ApplyUpdate(const std::vector<float>& summed,
                                                            int64_t total_visits) {
  if (static_cast<int64_t>(summed.size()) != num_params_) {
    return absl::InvalidArgumentError(
        absl::StrCat("update has ", summed.size(), " elements, stage has ", num_params_));
  }
  absl::MutexLock lock(&mu_);
  digest_.reset();  // Note [Digest cache]
  return model::TorchGuard("ApplyUpdate", [&]() -> absl::StatusOr<UpdateStats> {
    mu_.AssertHeld();  // the lambda runs under the lock above
    at::Tensor flat = at::from_blob(const_cast<float*>(summed.data()),
                                    {static_cast<int64_t>(summed.size())}, at::kFloat);
    absl::Status set = model::SetGradientsFromFlat(executor_->module(), flat);
    if (!set.ok()) return set;
    absl::StatusOr<model::StepStats> s =
        optimizer_->Step(step_, static_cast<double>(total_visits));
    // The step number advances even on failure so replicas stay in step.
    ++step_;
    executor_->ZeroGrad();
    if (!s.ok()) return s.status();
    return UpdateStats{s->stepped, s->grad_norm, s->lr};
  });
}

// Note [Group of one] (node/train/node_trainer.cc): the gradients stay
// where backward left them, on the stage's device. The step is the host
// path's to the byte: TakeGradients copies each gradient into a float
// vector and ApplyUpdate copies it back unchanged (a parameter without a
// gradient gets zeros there, so it gets zeros here), then the same
// optimiser step runs on the same values. A gradient that is not finite
// is what the group's rule skips (a sum that is not finite steps nothing);
// its check is one reduction on the device and one value read back.
absl::StatusOr<UpdateStats> TorchStageCompute::ApplyLocalUpdate() {
  absl::MutexLock lock(&mu_);
  digest_.reset();  // Note [Digest cache]
  return model::TorchGuard("ApplyLocalUpdate", [&]() -> absl::StatusOr<UpdateStats> {
    mu_.AssertHeld();  // the lambda runs under the lock above
    const int64_t visits_here = executor_->visits();
    int64_t visits = visits_here;
    bool nonfinite = false;
    if (visits > 0) {
      c10::NoGradGuard no_grad;
      at::Tensor bad;  // any element not finite, on the device
      for (at::Tensor& p : executor_->module().parameters()) {
        if (!p.grad().defined()) {
          p.mutable_grad() = at::zeros_like(p);
          continue;
        }
        at::Tensor b = at::logical_not(at::isfinite(p.grad())).any();
        bad = bad.defined() ? at::logical_or(bad, b) : b;
      }
      nonfinite = bad.defined() && bad.item<bool>();
      if (nonfinite) {
        executor_->ZeroGrad();
        visits = 0;  // the step of a round without visits: nothing moves
      }
    }
    absl::StatusOr<model::StepStats> s = optimizer_->Step(step_, static_cast<double>(visits));
    // The step number advances even on failure so replicas stay in step.
    ++step_;
    executor_->ZeroGrad();
    if (!s.ok()) return s.status();
    UpdateStats u{s->stepped, s->grad_norm, s->lr};
    u.visits = visits_here;
    u.nonfinite = nonfinite;
    return u;
  });
}

void TorchStageCompute::ZeroGrad() {
  absl::MutexLock lock(&mu_);
  executor_->ZeroGrad();
}

// Note [Digest cache]: a node asks for a stage's digest three times per
// iteration (its averaging contribution, the iteration report, the state
// server's boundary) while the parameters change once, in the update; each
// digest reads every parameter byte. So the digest is kept until something
// changes the parameters or the step: ApplyUpdate, ApplyOuterStep,
// ImportState and LoadCheckpoint clear it (before they start, so a failure
// half-way cannot leave a stale value). Nothing else writes the parameters:
// the executor() accessor is for tests that leave them alone.
uint64_t TorchStageCompute::ParamsDigest() {
  absl::MutexLock lock(&mu_);
  if (digest_.has_value()) return *digest_;
  uint64_t h = 0xcbf29ce484222325ull;
  h = HashBytes(h, &step_, sizeof(step_));
  for (const at::Tensor& p : executor_->module().parameters()) {
    at::Tensor c = p.detach().to(at::kCPU).contiguous();
    h = HashBytes(h, c.data_ptr(), c.numel() * c.element_size());
  }
  digest_ = h;
  return h;
}

int64_t TorchStageCompute::step() const {
  absl::MutexLock lock(&mu_);
  return step_;
}

absl::Status TorchStageCompute::SaveCheckpoint(const std::string& path) {
  absl::MutexLock lock(&mu_);
  return model::TorchGuard("SaveCheckpoint", [&]() -> absl::Status {
    mu_.AssertHeld();  // the lambda runs under the lock above
    // Note [Averaging state]: with H > 1 (or a residual) the file carries
    // the outer state too, so a restart continues the same outer steps.
    const std::string averaging = AveragingStateLocked();
    return model::SaveStageCheckpoint(path, executor_->module(), &optimizer_->adamw(), step_,
                                      /*extra=*/"", averaging);
  });
}

absl::StatusOr<int64_t> TorchStageCompute::LoadCheckpoint(const std::string& path) {
  absl::MutexLock lock(&mu_);
  digest_.reset();  // Note [Digest cache]
  return model::TorchGuard("LoadCheckpoint", [&]() -> absl::StatusOr<int64_t> {
    mu_.AssertHeld();  // the lambda runs under the lock above
    absl::StatusOr<model::CheckpointInfo> info =
        model::LoadStageCheckpoint(path, executor_->module(), &optimizer_->adamw());
    if (!info.ok()) return info.status();
    step_ = info->step;
    absl::Status averaging = RestoreAveragingLocked(info->averaging, path);
    if (!averaging.ok()) return averaging;
    return step_;
  });
}

absl::StatusOr<std::string> TorchStageCompute::ExportState() {
  absl::MutexLock lock(&mu_);
  return model::TorchGuard("ExportState", [&]() -> absl::StatusOr<std::string> {
    mu_.AssertHeld();  // the lambda runs under the lock above
    return ExportLocked();
  });
}

absl::StatusOr<int64_t> TorchStageCompute::ImportState(absl::string_view bytes) {
  absl::MutexLock lock(&mu_);
  digest_.reset();  // Note [Digest cache]
  return model::TorchGuard("ImportState", [&]() -> absl::StatusOr<int64_t> {
    mu_.AssertHeld();  // the lambda runs under the lock above
    return ImportLocked(bytes);
  });
}

}  // namespace skipswarm::node
