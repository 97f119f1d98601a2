#include "node/train/shard_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"

namespace skipswarm::node {
namespace {

using model::AvgCodecKind;
using model::AvgCodecSpec;

constexpr size_t kTag = 1;
constexpr int64_t kMaxSumParts = 64;  // GrpcGroupComm's kMaxMembers

void PutU32(std::string* out, uint32_t v) { out->append(reinterpret_cast<const char*>(&v), 4); }
void PutFloats(std::string* out, const float* v, int64_t n) {
  out->append(reinterpret_cast<const char*>(v), static_cast<size_t>(n) * 4);
}
uint32_t GetU32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
float GetFloat(const char* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}
bool AllFinite(const float* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(v[i])) return false;
  }
  return true;
}

std::string Raw(const float* v, int64_t n) {
  std::string out(1, static_cast<char>(ShardFormat::kFp32));
  PutFloats(&out, v, n);
  return out;
}

// Round to nearest, ties to even: model/tensor_codec.cc's bf16.
std::string Bf16(const float* v, int64_t n) {
  std::string out(1, static_cast<char>(ShardFormat::kBf16));
  out.resize(kTag + 2 * static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, &v[i], 4);
    const uint16_t h = static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    std::memcpy(&out[kTag + 2 * i], &h, 2);
  }
  return out;
}

// The blocks of the stage's index space that [offset, offset + n) touches.
int64_t BlocksTouched(int64_t offset, int64_t n, int64_t block) {
  return n == 0 ? 0 : (offset + n - 1) / block - offset / block + 1;
}

// The kInt8Blocks form of a kInt8 encoding `dense` when it is smaller:
// tag | u32 block | u32 kept | kept x u32 index (of the touched blocks,
// increasing) | kept x f32 scale | the kept blocks' int8 values.
std::string ZeroBlocksLeftOut(const std::string& dense, int64_t n, int64_t offset,
                              uint32_t block) {
  const int64_t nb = BlocksTouched(offset, n, block);
  const size_t scales_at = 5;
  const char* q = dense.data() + scales_at + 4 * nb;
  const int64_t first = offset / block;
  std::vector<uint32_t> kept;
  int64_t kept_values = 0;
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t lo = std::max<int64_t>(offset, (first + b) * block) - offset;
    const int64_t hi = std::min<int64_t>(offset + n, (first + b + 1) * block) - offset;
    bool zero = true;
    for (int64_t i = lo; i < hi && zero; ++i) zero = q[i] == 0;
    if (!zero) {
      kept.push_back(static_cast<uint32_t>(b));
      kept_values += hi - lo;
    }
  }
  const size_t sparse = 9 + 8 * kept.size() + static_cast<size_t>(kept_values);
  if (sparse >= dense.size()) return dense;
  std::string out(1, static_cast<char>(ShardFormat::kInt8Blocks));
  PutU32(&out, block);
  PutU32(&out, static_cast<uint32_t>(kept.size()));
  for (uint32_t b : kept) PutU32(&out, b);
  for (uint32_t b : kept) out.append(dense.data() + scales_at + 4 * b, 4);
  for (uint32_t b : kept) {
    const int64_t lo = std::max<int64_t>(offset, (first + b) * block) - offset;
    const int64_t hi = std::min<int64_t>(offset + n, (first + b + 1) * block) - offset;
    out.append(q + lo, static_cast<size_t>(hi - lo));
  }
  return out;
}

// Blockwise int8 on the stage's block grid (Note [Encoded shards]); the
// scale and rounding of model/tensor_codec.cc. REQUIRES: v finite.
std::string Int8(const float* v, int64_t n, int64_t offset, uint32_t block) {
  const int64_t nb = BlocksTouched(offset, n, block);
  std::string out(1, static_cast<char>(ShardFormat::kInt8));
  PutU32(&out, block);
  const size_t scales_at = out.size();
  out.resize(scales_at + 4 * nb + n);
  char* q = &out[scales_at + 4 * nb];
  const int64_t first = offset / block;
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t lo = std::max<int64_t>(offset, (first + b) * block) - offset;
    const int64_t hi = std::min<int64_t>(offset + n, (first + b + 1) * block) - offset;
    float amax = 0;
    for (int64_t i = lo; i < hi; ++i) amax = std::max(amax, std::fabs(v[i]));
    const float scale = amax / 127.0f;
    std::memcpy(&out[scales_at + 4 * b], &scale, 4);
    const float inv = amax > 0 ? 127.0f / amax : 0.0f;
    for (int64_t i = lo; i < hi; ++i) {
      const float x = v[i] * inv;
      q[i] = static_cast<char>(static_cast<int8_t>(static_cast<int>(x + (x >= 0 ? 0.5f : -0.5f))));
    }
  }
  return ZeroBlocksLeftOut(out, n, offset, block);
}

// (index, value) pairs of the non-zeros, or fp32 when that is smaller.
std::string SparseOrRaw(const float* v, int64_t n) {
  int64_t nnz = 0;
  for (int64_t i = 0; i < n; ++i) nnz += v[i] != 0.0f;
  if (5 + 8 * nnz >= 1 + 4 * n) return Raw(v, n);
  std::string out(1, static_cast<char>(ShardFormat::kSparse));
  PutU32(&out, static_cast<uint32_t>(nnz));
  for (int64_t i = 0; i < n; ++i) {
    if (v[i] != 0.0f) PutU32(&out, static_cast<uint32_t>(i));
  }
  for (int64_t i = 0; i < n; ++i) {
    if (v[i] != 0.0f) PutFloats(&out, &v[i], 1);
  }
  return out;
}

std::string LowRankOrRaw(const float* v, int64_t n, int64_t offset,
                         const model::LowRankFactors* f) {
  if (f == nullptr || n == 0 || f->rank < 1 || f->cols < 1 || f->rows < 1 ||
      f->rows * f->cols < offset + n || static_cast<int64_t>(f->p.size()) != f->rows * f->rank ||
      static_cast<int64_t>(f->q.size()) != f->cols * f->rank ||
      !AllFinite(f->p.data(), static_cast<int64_t>(f->p.size())) ||
      !AllFinite(f->q.data(), static_cast<int64_t>(f->q.size()))) {
    return Raw(v, n);
  }
  const int64_t row0 = offset / f->cols;
  const int64_t rows = (offset + n - 1) / f->cols + 1 - row0;
  if (17 + 4 * f->rank * (rows + f->cols) >= 1 + 4 * n) return Raw(v, n);
  std::string out(1, static_cast<char>(ShardFormat::kLowRank));
  PutU32(&out, static_cast<uint32_t>(f->cols));
  PutU32(&out, static_cast<uint32_t>(f->rank));
  PutU32(&out, static_cast<uint32_t>(row0));
  PutU32(&out, static_cast<uint32_t>(rows));
  PutFloats(&out, f->p.data() + row0 * f->rank, rows * f->rank);
  PutFloats(&out, f->q.data(), f->cols * f->rank);
  return out;
}

template <typename... Args>
absl::Status Bad(Args... args) {
  return absl::InvalidArgumentError(absl::StrCat("encoded gradient shard: ", args...));
}

absl::Status CheckSize(absl::string_view p, uint64_t want, const char* what) {
  if (p.size() != want) return Bad(what, " of ", p.size(), " bytes, expected ", want);
  return absl::OkStatus();
}

absl::Status CheckFinite(const char* p, int64_t count, const char* what) {
  for (int64_t i = 0; i < count; ++i) {
    if (!std::isfinite(GetFloat(p + 4 * i))) return Bad("a non-finite ", what);
  }
  return absl::OkStatus();
}

// kLowRank into out (add: out += the decoded part instead of out =).
absl::Status DecodeLowRank(const AvgCodecSpec& spec, absl::string_view p, int64_t n,
                           int64_t offset, int64_t total, float* out, bool add) {
  if (p.size() < 17) return Bad("low-rank header truncated");
  int64_t rows_all = 0, cols_all = 0;
  model::PowerSgdShape(total, &rows_all, &cols_all);
  const int64_t cols = GetU32(p.data() + 1), rank = GetU32(p.data() + 5);
  const int64_t row0 = GetU32(p.data() + 9), rows = GetU32(p.data() + 13);
  const int64_t max_rank = std::min<int64_t>(spec.rank, std::min(rows_all, cols_all));
  if (cols != cols_all) return Bad("low-rank matrix of ", cols, " columns, expected ", cols_all);
  if (rank < 1 || rank > max_rank) return Bad("rank ", rank, " not in [1, ", max_rank, "]");
  if (n == 0) return Bad("a low-rank shard of no elements");
  const int64_t want_row0 = offset / cols, want_rows = (offset + n - 1) / cols + 1 - want_row0;
  if (row0 != want_row0 || rows != want_rows) {
    return Bad("rows [", row0, ", +", rows, ") for elements at ", offset, ", expected [",
               want_row0, ", +", want_rows, ")");
  }
  absl::Status size =
      CheckSize(p, 17 + 4 * static_cast<uint64_t>(rank) * (rows + cols), "low-rank shard");
  if (!size.ok()) return size;
  const char* pp = p.data() + 17;
  const char* qq = pp + 4 * rank * rows;
  absl::Status finite = CheckFinite(pp, rank * (rows + cols), "low-rank factor");
  if (!finite.ok()) return finite;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t g = offset + i;
    const char* pr = pp + 4 * rank * (g / cols - row0);
    const char* qr = qq + 4 * rank * (g % cols);
    float s = 0;
    for (int64_t j = 0; j < rank; ++j) s += GetFloat(pr + 4 * j) * GetFloat(qr + 4 * j);
    out[i] = add ? out[i] + s : s;
  }
  return absl::OkStatus();
}

bool Allowed(const AvgCodecSpec& spec, ShardFormat f) {
  switch (f) {
    case ShardFormat::kFp32: return true;
    case ShardFormat::kBf16: return spec.kind == AvgCodecKind::kBf16;
    case ShardFormat::kInt8:
    case ShardFormat::kInt8Blocks: return spec.kind == AvgCodecKind::kInt8;
    case ShardFormat::kSparse: return spec.kind == AvgCodecKind::kTopK;
    case ShardFormat::kLowRank:
    case ShardFormat::kLowRankSum: return spec.kind == AvgCodecKind::kPowerSgd;
  }
  return false;
}

}  // namespace

std::string EncodeShard(const AvgCodecSpec& spec, const float* v, int64_t n, int64_t offset,
                        const model::LowRankFactors* factors) {
  switch (spec.kind) {
    case AvgCodecKind::kFp32: break;
    case AvgCodecKind::kBf16:
      if (AllFinite(v, n)) return Bf16(v, n);
      break;
    case AvgCodecKind::kInt8:
      if (AllFinite(v, n) && spec.block_size >= 1) return Int8(v, n, offset, spec.block_size);
      break;
    case AvgCodecKind::kTopK:
      if (AllFinite(v, n)) return SparseOrRaw(v, n);
      break;
    case AvgCodecKind::kPowerSgd:
      if (AllFinite(v, n)) return LowRankOrRaw(v, n, offset, factors);
      break;
  }
  // fp32, and a non-finite vector (Note [Robust averaging] must see it).
  return Raw(v, n);
}

std::string EncodeReducedShard(const AvgCodecSpec& spec, const float* reduced, int64_t n,
                               int64_t offset, float* residual,
                               const std::vector<absl::string_view>& parts) {
  if (!AllFinite(reduced, n)) return Raw(reduced, n);
  switch (spec.kind) {
    case AvgCodecKind::kFp32: break;
    case AvgCodecKind::kBf16: return Bf16(reduced, n);
    case AvgCodecKind::kInt8: {
      if (spec.block_size < 1) break;
      std::vector<float> corrected(reduced, reduced + n);
      if (residual != nullptr) {
        for (int64_t i = 0; i < n; ++i) corrected[i] += residual[i];
        if (!AllFinite(corrected.data(), n)) {
          std::fill(residual, residual + n, 0.0f);
          corrected.assign(reduced, reduced + n);
        }
      }
      std::string out = Int8(corrected.data(), n, offset, spec.block_size);
      if (residual != nullptr) {
        absl::StatusOr<std::vector<float>> sent = DecodeShard(spec, out, n, offset, offset + n);
        if (sent.ok()) {
          for (int64_t i = 0; i < n; ++i) residual[i] = corrected[i] - (*sent)[i];
        }
      }
      return out;
    }
    case AvgCodecKind::kTopK: return SparseOrRaw(reduced, n);
    case AvgCodecKind::kPowerSgd: {
      if (parts.empty() || static_cast<int64_t>(parts.size()) > kMaxSumParts) break;
      size_t bytes = 5;
      for (absl::string_view p : parts) {
        if (p.empty() || static_cast<ShardFormat>(p[0]) != ShardFormat::kLowRank) {
          return Raw(reduced, n);
        }
        bytes += 4 + p.size();
      }
      if (bytes >= 1 + 4 * static_cast<size_t>(n)) break;
      std::string out(1, static_cast<char>(ShardFormat::kLowRankSum));
      PutU32(&out, static_cast<uint32_t>(parts.size()));
      for (absl::string_view p : parts) {
        PutU32(&out, static_cast<uint32_t>(p.size()));
        out.append(p.data(), p.size());
      }
      return out;
    }
  }
  return Raw(reduced, n);
}

absl::StatusOr<std::vector<float>> DecodeShard(const AvgCodecSpec& spec,
                                               absl::string_view payload, int64_t n,
                                               int64_t offset, int64_t total) {
  if (n < 0 || offset < 0 || total < 0 || offset > total || n > total - offset) {
    return Bad("elements [", offset, ", +", n, ") outside a vector of ", total);
  }
  if (payload.empty()) return Bad("empty");
  if (payload.size() > MaxShardBytes(n)) {
    return Bad(payload.size(), " bytes for ", n, " elements (at most ", MaxShardBytes(n), ")");
  }
  const uint8_t tag = static_cast<uint8_t>(payload[0]);
  if (tag > static_cast<uint8_t>(ShardFormat::kInt8Blocks)) return Bad("unknown format ", tag);
  const ShardFormat format = static_cast<ShardFormat>(tag);
  if (!Allowed(spec, format)) {
    return Bad("format ", tag, " is not one --avg_codec=", model::AvgCodecName(spec),
               " sends (do the replicas agree on the codec?)");
  }
  std::vector<float> out(static_cast<size_t>(n));
  const char* p = payload.data();
  switch (format) {
    case ShardFormat::kFp32: {
      absl::Status s = CheckSize(payload, kTag + 4 * static_cast<uint64_t>(n), "fp32 shard");
      if (!s.ok()) return s;
      if (n > 0) std::memcpy(out.data(), p + kTag, 4 * static_cast<size_t>(n));
      return out;
    }
    case ShardFormat::kBf16: {
      absl::Status s = CheckSize(payload, kTag + 2 * static_cast<uint64_t>(n), "bf16 shard");
      if (!s.ok()) return s;
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + kTag + 2 * i, 2);
        const uint32_t u = static_cast<uint32_t>(h) << 16;
        std::memcpy(&out[i], &u, 4);
        if (!std::isfinite(out[i])) return Bad("a non-finite bf16 value");
      }
      return out;
    }
    case ShardFormat::kInt8: {
      if (payload.size() < 5) return Bad("int8 header truncated");
      const uint32_t block = GetU32(p + 1);
      if (block != spec.block_size || block == 0) {
        return Bad("int8 blocks of ", block, ", this node's codec uses ", spec.block_size);
      }
      const int64_t nb = BlocksTouched(offset, n, block);
      absl::Status s = CheckSize(payload, 5 + 4 * static_cast<uint64_t>(nb) + n, "int8 shard");
      if (!s.ok()) return s;
      const char* scales = p + 5;
      const int8_t* q = reinterpret_cast<const int8_t*>(scales + 4 * nb);
      const int64_t first = offset / block;
      for (int64_t b = 0; b < nb; ++b) {
        const float scale = GetFloat(scales + 4 * b);
        if (!(scale >= 0) || !std::isfinite(scale)) return Bad("int8 block ", b, " scale ", scale);
        const int64_t lo = std::max<int64_t>(offset, (first + b) * block) - offset;
        const int64_t hi = std::min<int64_t>(offset + n, (first + b + 1) * block) - offset;
        for (int64_t i = lo; i < hi; ++i) out[i] = static_cast<float>(q[i]) * scale;
      }
      return out;
    }
    case ShardFormat::kInt8Blocks: {
      if (payload.size() < 9) return Bad("int8 blocks header truncated");
      const uint32_t block = GetU32(p + 1);
      if (block != spec.block_size || block == 0) {
        return Bad("int8 blocks of ", block, ", this node's codec uses ", spec.block_size);
      }
      const int64_t nb = BlocksTouched(offset, n, block);
      const int64_t count = GetU32(p + 5);
      if (count > nb) return Bad(count, " int8 blocks for ", nb, " blocks");
      if (payload.size() < 9 + 8 * static_cast<uint64_t>(count)) {
        return Bad("int8 blocks index truncated");
      }
      const char* index = p + 9;
      const char* scales = index + 4 * count;
      const int8_t* q = reinterpret_cast<const int8_t*>(scales + 4 * count);
      const int64_t first = offset / block;
      uint64_t values = 0;
      int64_t last = -1;
      for (int64_t k = 0; k < count; ++k) {
        const int64_t b = GetU32(index + 4 * k);
        if (b <= last || b >= nb) return Bad("int8 block ", b, " after ", last, " (of ", nb, ")");
        last = b;
        const float scale = GetFloat(scales + 4 * k);
        if (!(scale >= 0) || !std::isfinite(scale)) return Bad("int8 block ", b, " scale ", scale);
        const int64_t lo = std::max<int64_t>(offset, (first + b) * block) - offset;
        const int64_t hi = std::min<int64_t>(offset + n, (first + b + 1) * block) - offset;
        values += static_cast<uint64_t>(hi - lo);
      }
      absl::Status s = CheckSize(payload, 9 + 8 * static_cast<uint64_t>(count) + values,
                                 "int8 blocks shard");
      if (!s.ok()) return s;
      for (int64_t k = 0; k < count; ++k) {
        const int64_t b = GetU32(index + 4 * k);
        const float scale = GetFloat(scales + 4 * k);
        const int64_t lo = std::max<int64_t>(offset, (first + b) * block) - offset;
        const int64_t hi = std::min<int64_t>(offset + n, (first + b + 1) * block) - offset;
        for (int64_t i = lo; i < hi; ++i) out[i] = static_cast<float>(q[i - lo]) * scale;
        q += hi - lo;
      }
      return out;
    }
    case ShardFormat::kSparse: {
      if (payload.size() < 5) return Bad("sparse header truncated");
      const int64_t count = GetU32(p + 1);
      if (count > n) return Bad(count, " sparse entries for ", n, " elements");
      absl::Status s = CheckSize(payload, 5 + 8 * static_cast<uint64_t>(count), "sparse shard");
      if (!s.ok()) return s;
      const char* values = p + 5 + 4 * count;
      int64_t last = -1;
      for (int64_t k = 0; k < count; ++k) {
        const int64_t i = GetU32(p + 5 + 4 * k);
        if (i <= last || i >= n) return Bad("sparse index ", i, " after ", last, " (of ", n, ")");
        last = i;
        out[i] = GetFloat(values + 4 * k);
        if (!std::isfinite(out[i])) return Bad("a non-finite sparse value");
      }
      return out;
    }
    case ShardFormat::kLowRank: {
      absl::Status s = DecodeLowRank(spec, payload, n, offset, total, out.data(), false);
      if (!s.ok()) return s;
      return out;
    }
    case ShardFormat::kLowRankSum: {
      if (payload.size() < 5) return Bad("low-rank sum header truncated");
      const int64_t count = GetU32(p + 1);
      if (count < 1 || count > kMaxSumParts) return Bad("a sum of ", count, " low-rank parts");
      size_t at = 5;
      for (int64_t k = 0; k < count; ++k) {
        if (payload.size() - at < 4) return Bad("low-rank sum part ", k, " truncated");
        const uint32_t len = GetU32(p + at);
        at += 4;
        if (len > payload.size() - at) return Bad("low-rank sum part ", k, " truncated");
        absl::string_view part = payload.substr(at, len);
        at += len;
        if (part.empty() || static_cast<ShardFormat>(part[0]) != ShardFormat::kLowRank) {
          return Bad("low-rank sum part ", k, " is not a low-rank shard");
        }
        absl::Status s = DecodeLowRank(spec, part, n, offset, total, out.data(), k > 0);
        if (!s.ok()) return s;
      }
      if (at != payload.size()) return Bad(payload.size() - at, " bytes after the low-rank sum");
      return out;
    }
  }
  return Bad("unknown format ", tag);
}

}  // namespace skipswarm::node
