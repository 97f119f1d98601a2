#include "model/avg_codec.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <exception>

#include "absl/strings/str_cat.h"
#include "model/tensor_codec.h"


namespace skipswarm::model {

AveragingCodec::AveragingCodec(const AvgCodecSpec& spec, int64_t numel, uint64_t seed)
    : spec_(spec), numel_(numel), residual_(at::zeros({numel}, at::kFloat)) {
  if (spec_.kind == AvgCodecKind::kPowerSgd) {
    int64_t rows = 0, cols = 0;
    PowerSgdShape(numel_, &rows, &cols);
    const int64_t r = std::min<int64_t>(spec_.rank, std::min(rows, cols));
    // Replicas draw the same warm start (their seed is the stage), so equal
    // inputs give equal factors.
    at::Generator gen = at::detail::createCPUGenerator(seed);
    q_ = at::randn({cols, r}, gen, at::kFloat);
  }
}

absl::Status AveragingCodec::SetResidual(const at::Tensor& residual) {
  if (!residual.defined() || residual.dim() != 1 || residual.numel() != numel_) {
    return absl::InvalidArgumentError(
        absl::StrCat("error-feedback residual must have ", numel_, " elements"));
  }
  residual_ = residual.to(at::kCPU, at::kFloat).contiguous().clone();
  return absl::OkStatus();
}

at::Tensor AveragingCodec::TopK(const at::Tensor& v) const {
  const int64_t k = std::min<int64_t>(
      numel_, std::max<int64_t>(1, static_cast<int64_t>(std::ceil(spec_.topk_fraction * numel_))));
  at::Tensor idx = std::get<1>(at::topk(v.abs(), k, /*dim=*/0, /*largest=*/true, /*sorted=*/false));
  at::Tensor out = at::zeros_like(v);
  out.index_put_({idx}, v.index({idx}));
  return out;
}

at::Tensor AveragingCodec::KeepLargestBlocks(const at::Tensor& v, double keep,
                                             int64_t* dropped) const {
  *dropped = 0;
  const int64_t block = std::max<int64_t>(1, spec_.block_size);
  const int64_t blocks = (numel_ + block - 1) / block;
  if (!(keep > 0) || keep >= 1 || blocks < 2) return v;
  const int64_t kept = std::min<int64_t>(
      blocks, std::max<int64_t>(1, static_cast<int64_t>(std::ceil(keep * blocks))));
  if (kept >= blocks) return v;
  at::Tensor padded = at::zeros({blocks * block}, at::kFloat);
  padded.slice(0, 0, numel_).copy_(v);
  at::Tensor norms = padded.view({blocks, block}).pow(2).sum(1);
  at::Tensor idx = std::get<1>(at::topk(norms, kept, /*dim=*/0, /*largest=*/true, /*sorted=*/false));
  at::Tensor mask = at::zeros({blocks}, at::kFloat);
  mask.index_put_({idx}, 1.0f);
  *dropped = blocks - kept;
  return (padded.view({blocks, block}) * mask.unsqueeze(1)).reshape({-1}).slice(0, 0, numel_).contiguous();
}

// One power iteration (PowerSGD): P = M Q, orthonormalise P, Q = M^T P,
// M ~ P Q^T. Q carries over to the next call.
at::Tensor AveragingCodec::LowRank(const at::Tensor& v, Result* r) {
  int64_t rows = 0, cols = 0;
  PowerSgdShape(numel_, &rows, &cols);
  at::Tensor padded = at::zeros({rows * cols}, at::kFloat);
  padded.slice(0, 0, numel_).copy_(v);
  at::Tensor m = padded.view({rows, cols});
  at::Tensor p = at::matmul(m, q_);
  p = std::get<0>(at::linalg_qr(p, "reduced"));
  at::Tensor q = at::matmul(m.t(), p);
  q_ = q.clone();
  r->p = p.contiguous();
  r->q = q.contiguous();
  return at::matmul(p, q.t()).reshape({-1}).slice(0, 0, numel_).contiguous();
}

absl::StatusOr<AveragingCodec::Result> AveragingCodec::Compress(const at::Tensor& flat,
                                                                double keep) {
  if (!flat.defined() || flat.dim() != 1 || flat.numel() != numel_) {
    return absl::InvalidArgumentError(
        absl::StrCat("averaging codec: vector must have ", numel_, " elements"));
  }
  try {
    at::Tensor v = flat.to(at::kCPU, at::kFloat).contiguous();
    if (!at::isfinite(v).all().item<bool>()) {
      return absl::InvalidArgumentError("averaging codec: the vector is not finite");
    }
    Result r;
    r.bytes = static_cast<int64_t>(AveragedBytes(spec_, static_cast<double>(numel_)));
    switch (spec_.kind) {
      case AvgCodecKind::kFp32:
        r.decoded = v.clone();
        break;
      case AvgCodecKind::kBf16:
      case AvgCodecKind::kInt8: {
        // Note [Error feedback].
        at::Tensor corrected = v + residual_;
        // Note [Thinned uploads]: int8 only (the shard codec skips its zero
        // blocks; bf16 would still send them).
        int64_t dropped = 0;
        at::Tensor sent = spec_.kind == AvgCodecKind::kInt8
                              ? KeepLargestBlocks(corrected, keep, &dropped)
                              : corrected;
        EncodeOptions o;
        o.codec = spec_.kind == AvgCodecKind::kBf16 ? Codec::kBf16 : Codec::kInt8Blockwise;
        o.block_size = spec_.block_size;
        absl::StatusOr<EncodedTensor> enc = EncodeTensor(sent, o);
        if (!enc.ok()) return enc.status();
        DecodeExpectations want;
        want.shape = {numel_};
        want.max_elements = std::max<int64_t>(numel_, 1);
        absl::StatusOr<at::Tensor> dec = DecodeTensor(enc->meta, enc->payload, want);
        if (!dec.ok()) return dec.status();
        r.bytes = static_cast<int64_t>(enc->payload.size());
        if (dropped > 0) {
          // What the shard codec sends: no zero block, its index per kept one.
          const int64_t block = std::max<int64_t>(1, spec_.block_size);
          const int64_t blocks = (numel_ + block - 1) / block;
          r.bytes = std::max<int64_t>(1, r.bytes - dropped * (block + 4) + 4 * (blocks - dropped) + 4);
        }
        r.decoded = *dec;
        residual_ = corrected - r.decoded;
        break;
      }
      case AvgCodecKind::kTopK:
      case AvgCodecKind::kPowerSgd: {
        // Note [Error feedback].
        at::Tensor corrected = v + residual_;
        r.decoded = spec_.kind == AvgCodecKind::kTopK ? TopK(corrected) : LowRank(corrected, &r);
        residual_ = corrected - r.decoded;
        break;
      }
    }
    return r;
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("averaging codec: ", e.what()));
  }
}

}  // namespace skipswarm::model
