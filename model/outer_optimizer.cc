#include "model/outer_optimizer.h"

#include <cstring>
#include <exception>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/crc32c.h"

namespace skipswarm::model {

OuterOptimizer::OuterOptimizer(const AveragingOptions& options, const at::Tensor& params)
    : options_(options) {
  Reset(params);
}

void OuterOptimizer::Reset(const at::Tensor& params) {
  anchor_ = params.detach().to(at::kCPU, at::kFloat).contiguous().clone();
  momentum_ = at::zeros_like(anchor_);
}

at::Tensor OuterOptimizer::PseudoGradient(const at::Tensor& params) const {
  return anchor_ - params.detach().to(at::kCPU, at::kFloat);
}

absl::StatusOr<at::Tensor> OuterOptimizer::Step(const at::Tensor& mean) {
  if (!mean.defined() || mean.dim() != 1 || mean.numel() != anchor_.numel()) {
    return absl::InvalidArgumentError(
        absl::StrCat("outer step: pseudo-gradient must have ", anchor_.numel(), " elements"));
  }
  at::Tensor g = mean.to(at::kCPU, at::kFloat);
  if (!at::isfinite(g).all().item<bool>()) {
    return absl::InvalidArgumentError("outer step: the averaged pseudo-gradient is not finite");
  }
  const double mu = options_.outer_momentum;
  // Nesterov, as torch.optim.SGD(nesterov=True) on the anchor.
  momentum_.mul_(mu).add_(g);
  at::Tensor update = g + momentum_ * mu;
  anchor_.sub_(update * options_.outer_lr);
  ++syncs_;
  return anchor_.clone();
}

namespace {

uint64_t Fnv(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

constexpr char kMagic[] = "SSAVGST1";
constexpr size_t kMagicLen = 8;
constexpr uint32_t kOuterPart = 1, kResidualPart = 2;

void PutU64(std::string* out, uint64_t v) { out->append(reinterpret_cast<const char*>(&v), 8); }
void PutU32(std::string* out, uint32_t v) { out->append(reinterpret_cast<const char*>(&v), 4); }
void PutVector(std::string* out, const at::Tensor& t) {
  at::Tensor c = t.to(at::kCPU, at::kFloat).contiguous();
  out->append(static_cast<const char*>(c.data_ptr()), c.numel() * sizeof(float));
}
at::Tensor GetVector(const char* p, int64_t n) {
  at::Tensor t = at::empty({n}, at::kFloat);
  std::memcpy(t.data_ptr(), p, n * sizeof(float));
  return t;
}

}  // namespace

uint64_t OuterOptimizer::AnchorDigest() const {
  uint64_t h = 0xcbf29ce484222325ull;
  h = Fnv(h, &syncs_, sizeof(syncs_));
  return Fnv(h, anchor_.data_ptr(), anchor_.numel() * sizeof(float));
}

std::string SerializeAveragingState(const OuterOptimizer* outer, const AveragingCodec* codec) {
  const int64_t n = outer != nullptr ? outer->numel() : codec != nullptr ? codec->numel() : 0;
  const bool residual = codec != nullptr && codec->has_residual();
  std::string out(kMagic, kMagicLen);
  PutU64(&out, static_cast<uint64_t>(n));
  PutU64(&out, outer != nullptr ? static_cast<uint64_t>(outer->syncs_) : 0);
  PutU32(&out, (outer != nullptr ? kOuterPart : 0) | (residual ? kResidualPart : 0));
  if (outer != nullptr) {
    PutVector(&out, outer->anchor_);
    PutVector(&out, outer->momentum_);
  }
  if (residual) PutVector(&out, codec->residual());
  PutU32(&out, common::Crc32c(out));
  return out;
}

absl::Status RestoreAveragingState(absl::string_view bytes, OuterOptimizer* outer,
                                   AveragingCodec* codec) {
  constexpr size_t kHeader = kMagicLen + 8 + 8 + 4;
  if (bytes.size() < kHeader + 4 || std::memcmp(bytes.data(), kMagic, kMagicLen) != 0) {
    return absl::InvalidArgumentError("averaging state: bad magic or truncated");
  }
  uint32_t crc = 0;
  std::memcpy(&crc, bytes.data() + bytes.size() - 4, 4);
  if (common::Crc32c(bytes.substr(0, bytes.size() - 4)) != crc) {
    return absl::DataLossError("averaging state: checksum mismatch");
  }
  uint64_t n = 0, syncs = 0;
  uint32_t parts = 0;
  std::memcpy(&n, bytes.data() + kMagicLen, 8);
  std::memcpy(&syncs, bytes.data() + kMagicLen + 8, 8);
  std::memcpy(&parts, bytes.data() + kMagicLen + 16, 4);
  const int64_t want = outer != nullptr ? outer->numel() : codec != nullptr ? codec->numel() : 0;
  const uint64_t vectors = ((parts & kOuterPart) ? 2 : 0) + ((parts & kResidualPart) ? 1 : 0);
  if (n != static_cast<uint64_t>(want) || (parts & ~(kOuterPart | kResidualPart)) != 0 ||
      bytes.size() != kHeader + vectors * n * sizeof(float) + 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        "averaging state: holds ", n, " elements (parts ", parts, "), this stage has ", want));
  }
  const char* p = bytes.data() + kHeader;
  const int64_t len = static_cast<int64_t>(n);
  if (outer != nullptr) {
    if (parts & kOuterPart) {
      outer->anchor_ = GetVector(p, len);
      outer->momentum_ = GetVector(p + len * sizeof(float), len);
      outer->syncs_ = static_cast<int64_t>(syncs);
    } else {
      outer->momentum_.zero_();
    }
  }
  if (parts & kOuterPart) p += 2 * len * sizeof(float);
  if (codec != nullptr && codec->has_residual()) {
    absl::Status s = codec->SetResidual((parts & kResidualPart) ? GetVector(p, len)
                                                                : at::zeros({len}, at::kFloat));
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

at::Tensor FlattenParameters(StageModule& module) {
  std::vector<at::Tensor> parts;
  for (auto& p : module.parameters()) parts.push_back(p.detach().to(at::kCPU, at::kFloat).reshape({-1}));
  return at::cat(parts);
}

absl::Status SetParametersFromFlat(StageModule& module, const at::Tensor& flat) {
  std::vector<at::Tensor> params = module.parameters();
  int64_t total = 0;
  for (auto& p : params) total += p.numel();
  if (!flat.defined() || flat.dim() != 1 || flat.numel() != total) {
    return absl::InvalidArgumentError(absl::StrCat(
        "stage ", module.stage(), ": flat parameters must be a vector of ", total, " elements"));
  }
  try {
    c10::NoGradGuard no_grad;
    int64_t at = 0;
    for (auto& p : params) {
      p.copy_(flat.slice(0, at, at + p.numel()).view(p.sizes()));
      at += p.numel();
    }
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("setting parameters: ", e.what()));
  }
  return absl::OkStatus();
}

}  // namespace skipswarm::model
