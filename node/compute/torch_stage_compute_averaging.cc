// TorchStageCompute's side of Note [Outer steps] (node/train/node_trainer.h):
// the averaging codec, the pseudo-gradient and outer step, and the
// averaging state that state transfer carries (Note [Averaging state] in
// model/outer_optimizer.h).
#include <cmath>
#include <cstring>
#include <exception>

#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "model/checkpoint.h"
#include "model/stage_executor.h"
#include "node/compute/torch_stage_compute.h"

namespace skipswarm::node {
namespace {

// As torch_stage_compute.cc's Guard: no exception leaves the compute.
template <typename Fn>
auto Caught(const char* what, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(what, ": ", e.what()));
  }
}

std::vector<float> ToVector(const at::Tensor& t) {
  at::Tensor c = t.to(at::kCPU, at::kFloat).contiguous();
  const float* p = c.data_ptr<float>();
  return std::vector<float>(p, p + c.numel());
}

// powersgd's factors for the wire (Note [Encoded shards] in
// node/train/shard_codec.h); null for the other codecs.
std::shared_ptr<const model::LowRankFactors> Factors(const model::AveragingCodec::Result& r) {
  if (!r.p.defined() || !r.q.defined() || r.p.dim() != 2 || r.q.dim() != 2) return nullptr;
  auto f = std::make_shared<model::LowRankFactors>();
  f->rows = r.p.size(0);
  f->cols = r.q.size(0);
  f->rank = r.p.size(1);
  f->p = ToVector(r.p);
  f->q = ToVector(r.q);
  return f;
}

// Exported state with averaging state: "SSSTAVG1" | u64 stage_len | the
// stage state (model/checkpoint.h) | SerializeAveragingState's bytes.
// Without averaging state the export is the stage state alone, as before.
constexpr char kPackMagic[] = "SSSTAVG1";
constexpr size_t kPackMagicLen = 8;

}  // namespace

AveragingPlan TorchStageCompute::averaging() const {
  if (options_.frozen) return {};
  const model::AveragingOptions& a = options_.averaging;
  return {a.outer_every,
          model::IsLossy(a.codec),
          a.overlap,
          a.sync_deadline_factor,
          a.sync_deadline_min_s,
          a.upload_floor,
          static_cast<int64_t>(model::AveragedBytes(a.codec, static_cast<double>(num_params_)))};
}

void TorchStageCompute::SetUploadFraction(double fraction) {
  absl::MutexLock lock(&mu_);
  upload_fraction_ = fraction;
}

absl::StatusOr<AverageContribution> TorchStageCompute::CompressGradients(std::vector<float> flat) {
  if (static_cast<int64_t>(flat.size()) != num_params_) {
    return absl::InvalidArgumentError(
        absl::StrCat("gradient has ", flat.size(), " elements, stage has ", num_params_));
  }
  const uint64_t digest = ParamsDigest();
  absl::MutexLock lock(&mu_);
  return Caught("CompressGradients", [&]() -> absl::StatusOr<AverageContribution> {
    mu_.AssertHeld();  // the lambda runs under the lock above
    AverageContribution c;
    c.digest = digest;
    if (codec_ == nullptr) {
      c.bytes = static_cast<int64_t>(model::AveragedBytes({}, static_cast<double>(num_params_)));
      c.flat = std::move(flat);
      return c;
    }
    at::Tensor t = at::from_blob(flat.data(), {num_params_}, at::kFloat);
    absl::StatusOr<model::AveragingCodec::Result> r = codec_->Compress(t);
    // A non-finite gradient goes out as it is: the group skips the step
    // alike (Note [Non-finite steps]) and the residual stays clean.
    if (!r.ok()) {
      c.bytes = static_cast<int64_t>(
          model::AveragedBytes(codec_->spec(), static_cast<double>(num_params_)));
      c.flat = std::move(flat);
      return c;
    }
    c.bytes = r->bytes;
    c.flat = ToVector(r->decoded);
    c.factors = Factors(*r);
    return c;
  });
}

absl::StatusOr<AverageContribution> TorchStageCompute::TakePseudoGradient() {
  absl::MutexLock lock(&mu_);
  if (outer_ == nullptr) return absl::FailedPreconditionError("no outer optimiser (H = 1)");
  return Caught("TakePseudoGradient", [&]() -> absl::StatusOr<AverageContribution> {
    mu_.AssertHeld();  // the lambda runs under the lock above
    at::Tensor params = model::FlattenParameters(executor_->module());
    at::Tensor g = outer_->PseudoGradient(params);
    const double keep = upload_fraction_;  // Note [Thinned uploads]
    upload_fraction_ = 1;
    // Note [Overlapped sync]: where this round started.
    if (options_.averaging.overlap) at_round_start_ = params.clone();
    AverageContribution c;
    c.digest = outer_->AnchorDigest();
    // Note [Idle outer contributions]: exactly the anchor (no inner step
    // stepped since). Zeros, and the codec's residual is kept for a round
    // this replica trains in.
    if (!g.ne(0).any().item<bool>()) {
      c.idle = true;
      c.flat.assign(static_cast<size_t>(num_params_), 0.f);
      c.bytes = static_cast<int64_t>(model::AveragedBytes(
          codec_ != nullptr ? codec_->spec() : model::AvgCodecSpec{},
          static_cast<double>(num_params_)));
      return c;
    }
    if (codec_ != nullptr) {
      absl::StatusOr<model::AveragingCodec::Result> r = codec_->Compress(g, keep);
      if (r.ok()) {
        c.bytes = r->bytes;
        c.flat = ToVector(r->decoded);
        c.factors = Factors(*r);
        return c;
      }
      // Not finite: sent as is, the group reverts to the anchor alike.
    }
    c.bytes = static_cast<int64_t>(model::AveragedBytes(
        codec_ != nullptr ? codec_->spec() : model::AvgCodecSpec{}, static_cast<double>(num_params_)));
    c.flat = ToVector(g);
    return c;
  });
}

absl::StatusOr<UpdateStats> TorchStageCompute::ApplyOuterStep(const std::vector<float>& summed,
                                                              int contributors) {
  if (static_cast<int64_t>(summed.size()) != num_params_) {
    return absl::InvalidArgumentError(
        absl::StrCat("outer update has ", summed.size(), " elements, stage has ", num_params_));
  }
  absl::MutexLock lock(&mu_);
  if (outer_ == nullptr) return absl::FailedPreconditionError("no outer optimiser (H = 1)");
  digest_.reset();  // Note [Digest cache] (torch_stage_compute.cc)
  return Caught("ApplyOuterStep", [&]() -> absl::StatusOr<UpdateStats> {
    mu_.AssertHeld();  // the lambda runs under the lock above
    at::Tensor sum = at::from_blob(const_cast<float*>(summed.data()), {num_params_}, at::kFloat);
    UpdateStats u;
    at::Tensor next = outer_->anchor();
    if (contributors > 0) {
      at::Tensor mean = sum / static_cast<double>(contributors);
      u.grad_norm = mean.norm().item<double>();
      absl::StatusOr<at::Tensor> stepped = outer_->Step(mean);
      if (stepped.ok()) {
        next = *stepped;
        u.stepped = true;
      }
    }
    u.lr = options_.averaging.outer_lr;
    if (at_round_start_.defined()) {
      // Note [Overlapped sync]: the steps since the round started stay.
      next = next + (model::FlattenParameters(executor_->module()) - at_round_start_);
      at_round_start_ = at::Tensor();
    }
    absl::Status set = model::SetParametersFromFlat(executor_->module(), next);
    if (!set.ok()) return set;
    return u;
  });
}

void TorchStageCompute::ResetAveragingLocked() {
  at_round_start_ = at::Tensor();
  if (outer_ != nullptr) outer_->Reset(model::FlattenParameters(executor_->module()));
  if (codec_ != nullptr && codec_->has_residual()) {
    (void)codec_->SetResidual(at::zeros({num_params_}, at::kFloat));
  }
}

std::string TorchStageCompute::AveragingStateLocked() {
  const bool has_state = outer_ != nullptr || (codec_ != nullptr && codec_->has_residual());
  return has_state ? model::SerializeAveragingState(outer_.get(), codec_.get()) : std::string();
}

absl::Status TorchStageCompute::RestoreAveragingLocked(absl::string_view bytes,
                                                       const std::string& what) {
  ResetAveragingLocked();
  const bool has_state = outer_ != nullptr || (codec_ != nullptr && codec_->has_residual());
  if (!has_state) return absl::OkStatus();
  if (bytes.empty()) {
    LOG(INFO) << what << ": no averaging state saved (an older checkpoint, or saved with H = 1);"
              << " stage " << options_.stage
              << " starts its outer steps from the loaded weights with zero momentum";
    return absl::OkStatus();
  }
  absl::Status s = model::RestoreAveragingState(bytes, outer_.get(), codec_.get());
  if (!s.ok()) {
    ResetAveragingLocked();
    return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> TorchStageCompute::ExportLocked() {
  absl::StatusOr<std::string> stage =
      model::SerializeStageState(executor_->module(), &optimizer_->adamw(), step_);
  if (!stage.ok()) return stage;
  const bool has_state = outer_ != nullptr || (codec_ != nullptr && codec_->has_residual());
  if (!has_state) return stage;
  std::string out(kPackMagic, kPackMagicLen);
  const uint64_t len = stage->size();
  out.append(reinterpret_cast<const char*>(&len), sizeof(len));
  out.append(*stage);
  out.append(model::SerializeAveragingState(outer_.get(), codec_.get()));
  return out;
}

absl::StatusOr<int64_t> TorchStageCompute::ImportLocked(absl::string_view bytes) {
  absl::string_view stage = bytes, averaging;
  if (bytes.size() >= kPackMagicLen + 8 && std::memcmp(bytes.data(), kPackMagic, kPackMagicLen) == 0) {
    uint64_t len = 0;
    std::memcpy(&len, bytes.data() + kPackMagicLen, sizeof(len));
    if (len > bytes.size() - kPackMagicLen - 8) {
      return absl::InvalidArgumentError("state: stage part longer than the state");
    }
    stage = bytes.substr(kPackMagicLen + 8, len);
    averaging = bytes.substr(kPackMagicLen + 8 + len);
  }
  absl::StatusOr<model::CheckpointInfo> info = model::RestoreStageState(
      stage, executor_->module(), options_.frozen ? nullptr : &optimizer_->adamw(),
      model::StateSource::kPeer);
  if (!info.ok()) return info.status();
  step_ = info->step;
  at_round_start_ = at::Tensor();  // Note [Overlapped sync]: a round of the old state
  // A source without averaging state (H = 1, or an older node): this
  // replica's anchor becomes the imported weights. Note [Averaging state].
  if (averaging.empty() || (outer_ == nullptr && codec_ == nullptr)) {
    ResetAveragingLocked();
  } else {
    absl::Status s = model::RestoreAveragingState(averaging, outer_.get(), codec_.get());
    if (!s.ok()) {
      ResetAveragingLocked();
      return s;
    }
  }
  return step_;
}

}  // namespace skipswarm::node
