#include "model/tensor_codec.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/crc32c.h"
#include "model/torch_guard.h"

namespace skipswarm::model {
namespace {

bool IsFloatCodec(Codec c) {
  return c == Codec::kRawFp32 || c == Codec::kFp16 || c == Codec::kBf16 ||
         c == Codec::kInt8Blockwise;
}

constexpr uint32_t kMaxBlockSize = 1u << 20;

// Payload bytes for `numel` elements; 0 if the codec is unknown.
uint64_t PayloadBytes(Codec codec, uint64_t numel, uint32_t block_size) {
  switch (codec) {
    case Codec::kRawFp32: return numel * 4;
    case Codec::kFp16:
    case Codec::kBf16: return numel * 2;
    case Codec::kInt8Blockwise: return (numel + block_size - 1) / block_size * 4 + numel;
    case Codec::kRawInt64: return numel * 8;
    default: return 0;
  }
}

// ---- float <-> half / bfloat16 -------------------------------------------

#if defined(__x86_64__)
bool HasF16c() {
  // F16C from CPUID (clang 14's __builtin_cpu_supports does not know "f16c");
  // "avx" also checks that the OS saves the YMM registers.
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0 &&
           __builtin_cpu_supports("avx");
  }();
  return has;
}
__attribute__((target("avx,f16c"))) void FloatToHalfF16c(const float* in, uint16_t* out,
                                                         int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  for (; i < n; ++i) {
    out[i] = static_cast<uint16_t>(
        _mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(in[i]), _MM_FROUND_TO_NEAREST_INT), 0));
  }
}
__attribute__((target("avx,f16c"))) void HalfToFloatF16c(const uint8_t* in, float* out,
                                                         int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 2 * i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) {
    uint16_t v;
    std::memcpy(&v, in + 2 * i, 2);
    out[i] = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(v)));
  }
}
#endif

void FloatToHalf(const float* in, uint16_t* out, int64_t n) {
#if defined(__x86_64__)
  if (HasF16c()) return FloatToHalfF16c(in, out, n);
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = c10::Half(in[i]).x;
}

void HalfToFloat(const uint8_t* in, float* out, int64_t n) {
#if defined(__x86_64__)
  if (HasF16c()) return HalfToFloatF16c(in, out, n);
#endif
  for (int64_t i = 0; i < n; ++i) {
    uint16_t v;
    std::memcpy(&v, in + 2 * i, 2);
    out[i] = static_cast<float>(c10::Half(v, c10::Half::from_bits()));
  }
}

void FloatToBf16(const float* in, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, &in[i], 4);
    const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
    // Round to nearest, ties to even.
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    out[i] = nan ? static_cast<uint16_t>((u >> 16) | 0x40u) : static_cast<uint16_t>(rounded);
  }
}

void Bf16ToFloat(const uint8_t* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint16_t v;
    std::memcpy(&v, in + 2 * i, 2);
    const uint32_t u = static_cast<uint32_t>(v) << 16;
    std::memcpy(&out[i], &u, 4);
  }
}

// ---- blockwise int8 ---------------------------------------------------------

void FloatToInt8Blocks(const float* in, int64_t n, uint32_t block, char* out) {
  const int64_t blocks = (n + block - 1) / block;
  char* scales = out;
  int8_t* q = reinterpret_cast<int8_t*>(out + blocks * 4);
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t lo = b * block, hi = std::min<int64_t>(n, lo + block);
    // One branch-free pass for the scale; a NaN or Inf fails `a <= max`.
    float amax = 0;
    int finite = 1;
    for (int64_t i = lo; i < hi; ++i) {
      const float a = std::fabs(in[i]);
      amax = a > amax ? a : amax;
      finite &= a <= std::numeric_limits<float>::max();
    }
    // A non-finite input makes a NaN scale, which the decoder reports.
    const float scale = finite ? amax / 127.0f : std::numeric_limits<float>::quiet_NaN();
    std::memcpy(scales + 4 * b, &scale, 4);
    if (!finite) {
      std::memset(q + lo, 0, hi - lo);
      continue;
    }
    const float inv = amax > 0 ? 127.0f / amax : 0.0f;
    for (int64_t i = lo; i < hi; ++i) {
      // |in * inv| <= 127 here, so the rounding below cannot overflow int8.
      const float v = in[i] * inv;
      q[i] = static_cast<int8_t>(static_cast<int>(v + (v >= 0 ? 0.5f : -0.5f)));
    }
  }
}

void Int8BlocksToFloat(const uint8_t* in, int64_t n, uint32_t block, float* out) {
  const int64_t blocks = (n + block - 1) / block;
  const int8_t* q = reinterpret_cast<const int8_t*>(in + blocks * 4);
  for (int64_t b = 0; b < blocks; ++b) {
    float scale;
    std::memcpy(&scale, in + 4 * b, 4);
    const int64_t lo = b * block, hi = std::min<int64_t>(n, lo + block);
    for (int64_t i = lo; i < hi; ++i) out[i] = static_cast<float>(q[i]) * scale;
  }
}

int64_t CountNonFinite(const float* p, int64_t n) {
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, &p[i], 4);
    bad += ((u & 0x7f800000u) == 0x7f800000u);
  }
  return bad;
}

std::string Shape(const std::vector<int64_t>& s) {
  return absl::StrCat("[", absl::StrJoin(s, ","), "]");
}

absl::StatusOr<EncodedTensor> EncodeImpl(const at::Tensor& tensor, const EncodeOptions& opt) {
  if (!tensor.defined()) return absl::InvalidArgumentError("encode: undefined tensor");
  const Codec codec = opt.codec;
  if (!IsFloatCodec(codec) && codec != Codec::kRawInt64) {
    return absl::InvalidArgumentError(absl::StrCat("encode: unknown codec ",
                                                   static_cast<int>(codec)));
  }
  const bool is_float = at::isFloatingType(tensor.scalar_type());
  if (IsFloatCodec(codec) != is_float || tensor.scalar_type() == at::kBool) {
    return absl::InvalidArgumentError(absl::StrCat("encode: codec ", CodecName(codec),
                                                   " cannot carry dtype ",
                                                   c10::toString(tensor.scalar_type())));
  }
  if (tensor.dim() < 1 || tensor.dim() > kMaxRank || tensor.numel() == 0) {
    return absl::InvalidArgumentError("encode: need a non-empty tensor of rank 1..8");
  }
  if (codec == Codec::kInt8Blockwise && (opt.block_size < 1 || opt.block_size > kMaxBlockSize)) {
    return absl::InvalidArgumentError("encode: block_size must be in [1, 2^20]");
  }
  const int64_t n = tensor.numel();
  const uint32_t block = codec == Codec::kInt8Blockwise ? opt.block_size : 0;
  const uint64_t bytes = PayloadBytes(codec, n, block);
  if (bytes > kMaxPayloadBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("encode: payload of ", bytes, " bytes exceeds ", kMaxPayloadBytes));
  }
  EncodedTensor enc;
  enc.meta.dtype = is_float ? WireDType::kFloat32 : WireDType::kInt64;
  enc.meta.shape.assign(tensor.sizes().begin(), tensor.sizes().end());
  enc.meta.codec = codec;
  enc.meta.block_size = block;
  enc.meta.payload_bytes = bytes;
  at::Tensor t = tensor.detach().to(at::kCPU, is_float ? at::kFloat : at::kLong).contiguous();
  if (codec == Codec::kRawFp32 || codec == Codec::kRawInt64) {
    // One copy, no zero fill first (what a resize would write is overwritten).
    enc.payload.assign(static_cast<const char*>(t.data_ptr()), bytes);
  } else {
    enc.payload.resize(bytes);
  }
  char* out = enc.payload.data();
  switch (codec) {
    case Codec::kRawFp32:
    case Codec::kRawInt64: break;  // copied above
    case Codec::kFp16:
      FloatToHalf(t.data_ptr<float>(), reinterpret_cast<uint16_t*>(out), n);
      break;
    case Codec::kBf16:
      FloatToBf16(t.data_ptr<float>(), reinterpret_cast<uint16_t*>(out), n);
      break;
    case Codec::kInt8Blockwise: FloatToInt8Blocks(t.data_ptr<float>(), n, block, out); break;
    default: break;
  }
  enc.meta.payload_crc32c = common::Crc32c(out, bytes);
  return enc;
}

// Note [Decoder checks]
// A peer controls every byte of the metadata and the payload. The checks run
// from cheap to expensive and each one makes the next safe: known codec and
// dtype; dtype consistent with the codec and equal to what the receiver
// wants; codec allowed; rank and every dim in range and equal to the
// expected shape; element count without overflow and under the limit;
// block size sane; payload size equal to what shape+codec imply (so no read
// past the buffer is possible) and under the limit; CRC; only then decode;
// finally int8 scales and the decoded values for NaN/Inf.
absl::StatusOr<at::Tensor> DecodeImpl(const TensorMeta& meta, absl::string_view payload,
                                      const DecodeExpectations& want, DecodeStats* stats,
                                      std::string* adopt) {
  auto bad = [](auto... parts) {
    return absl::InvalidArgumentError(absl::StrCat("decode: ", parts...));
  };
  const Codec codec = meta.codec;
  if (!IsFloatCodec(codec) && codec != Codec::kRawInt64) {
    return bad("unknown codec ", static_cast<int>(codec));
  }
  const WireDType codec_dtype = IsFloatCodec(codec) ? WireDType::kFloat32 : WireDType::kInt64;
  if (meta.dtype != codec_dtype) {
    return bad("dtype ", static_cast<int>(meta.dtype), " does not match codec ",
               CodecName(codec));
  }
  if (meta.dtype != want.dtype) {
    return bad("dtype ", static_cast<int>(meta.dtype), " but expected ",
               static_cast<int>(want.dtype));
  }
  if (!want.allowed_codecs.empty() &&
      std::find(want.allowed_codecs.begin(), want.allowed_codecs.end(), codec) ==
          want.allowed_codecs.end()) {
    return bad("codec ", CodecName(codec), " is not accepted here");
  }
  const size_t rank = meta.shape.size();
  if (rank < 1 || rank > static_cast<size_t>(kMaxRank)) return bad("rank ", rank, " not in [1, 8]");
  if (!want.shape.empty() && rank != want.shape.size()) {
    return bad("shape ", Shape(meta.shape), " but expected ", Shape(want.shape));
  }
  int64_t numel = 1;
  for (size_t i = 0; i < rank; ++i) {
    const int64_t d = meta.shape[i];
    if (d < 1 || d > want.max_dim) return bad("dim ", i, " = ", d, " out of range");
    if (!want.shape.empty() && want.shape[i] >= 0 && want.shape[i] != d) {
      return bad("shape ", Shape(meta.shape), " but expected ", Shape(want.shape));
    }
    if (numel > want.max_elements / d) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "decode: shape ", Shape(meta.shape), " exceeds ", want.max_elements, " elements"));
    }
    numel *= d;
  }
  if (codec == Codec::kInt8Blockwise) {
    if (meta.block_size < 1 || meta.block_size > kMaxBlockSize) {
      return bad("block_size ", meta.block_size, " not in [1, 2^20]");
    }
  } else if (meta.block_size != 0) {
    return bad("block_size set for codec ", CodecName(codec));
  }
  const uint64_t expected_bytes = PayloadBytes(codec, numel, meta.block_size);
  if (expected_bytes > want.max_payload_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("decode: payload of ", expected_bytes,
                                                     " bytes exceeds the limit ",
                                                     want.max_payload_bytes));
  }
  if (meta.payload_bytes != expected_bytes || payload.size() != expected_bytes) {
    return bad("payload is ", payload.size(), " bytes (header says ", meta.payload_bytes,
               "), shape ", Shape(meta.shape), " with ", CodecName(codec), " needs ",
               expected_bytes);
  }
  const uint32_t crc = common::Crc32c(payload.data(), payload.size());
  if (crc != meta.payload_crc32c) {
    return absl::DataLossError(absl::StrCat("decode: payload CRC-32C ", crc,
                                            " does not match header ", meta.payload_crc32c));
  }
  const uint8_t* in = reinterpret_cast<const uint8_t*>(payload.data());
  const size_t align = codec == Codec::kRawInt64 ? 8 : 4;
  if (adopt != nullptr && (codec == Codec::kRawInt64 || codec == Codec::kRawFp32)) {
    // Move the buffer to the heap first (a short string's bytes live inside
    // the string object), then let the tensor own it.
    auto* owned = new std::string(std::move(*adopt));
    if (reinterpret_cast<uintptr_t>(owned->data()) % align == 0) {
      at::Tensor out = at::from_blob(
          owned->data(), meta.shape, [owned](void*) { delete owned; },
          at::TensorOptions().dtype(codec == Codec::kRawInt64 ? at::kLong : at::kFloat));
      if (codec == Codec::kRawFp32) {
        const int64_t non_finite = CountNonFinite(out.data_ptr<float>(), numel);
        if (non_finite > 0 && want.non_finite == NonFinitePolicy::kReject) {
          return bad(non_finite, " of ", numel, " values are NaN or Inf");
        }
        if (stats != nullptr) stats->non_finite += non_finite;
      }
      return out;
    }
    *adopt = std::move(*owned);  // misaligned: fall back to copying
    delete owned;
    in = reinterpret_cast<const uint8_t*>(adopt->data());
  }
  if (codec == Codec::kRawInt64) {
    at::Tensor out = at::empty(meta.shape, at::kLong);
    std::memcpy(out.data_ptr(), in, expected_bytes);
    return out;
  }
  at::Tensor out = at::empty(meta.shape, at::kFloat);
  float* p = out.data_ptr<float>();
  switch (codec) {
    case Codec::kRawFp32: std::memcpy(p, in, expected_bytes); break;
    case Codec::kFp16: HalfToFloat(in, p, numel); break;
    case Codec::kBf16: Bf16ToFloat(in, p, numel); break;
    case Codec::kInt8Blockwise: {
      const int64_t blocks = (numel + meta.block_size - 1) / meta.block_size;
      for (int64_t b = 0; b < blocks; ++b) {
        float scale;
        std::memcpy(&scale, in + 4 * b, 4);
        if (scale < 0) return bad("int8 block ", b, " has a negative scale");
      }
      Int8BlocksToFloat(in, numel, meta.block_size, p);
      break;
    }
    default: break;
  }
  const int64_t non_finite = CountNonFinite(p, numel);
  if (non_finite > 0 && want.non_finite == NonFinitePolicy::kReject) {
    return bad(non_finite, " of ", numel, " values are NaN or Inf");
  }
  if (stats != nullptr) stats->non_finite += non_finite;
  return out;
}

}  // namespace

absl::StatusOr<EncodedTensor> EncodeTensor(const at::Tensor& tensor, const EncodeOptions& opt) {
  return TorchGuard("encode", [&] { return EncodeImpl(tensor, opt); });
}

absl::StatusOr<at::Tensor> DecodeTensor(const TensorMeta& meta, absl::string_view payload,
                                        const DecodeExpectations& expect, DecodeStats* stats) {
  return TorchGuard("decode", [&] { return DecodeImpl(meta, payload, expect, stats, nullptr); });
}

absl::StatusOr<at::Tensor> DecodeTensor(const TensorMeta& meta, std::string&& payload,
                                        const DecodeExpectations& expect, DecodeStats* stats) {
  return TorchGuard("decode", [&] { return DecodeImpl(meta, payload, expect, stats, &payload); });
}

CodecError MeasureCodecError(const at::Tensor& original, const at::Tensor& decoded) {
  at::Tensor a = original.detach().to(at::kCPU, at::kDouble);
  at::Tensor diff = a - decoded.detach().to(at::kCPU, at::kDouble);
  CodecError e;
  e.max_abs = diff.abs().max().item<double>();
  const double norm = a.norm().item<double>();
  e.rel_l2 = norm > 0 ? diff.norm().item<double>() / norm : 0.0;
  return e;
}

}  // namespace skipswarm::model
