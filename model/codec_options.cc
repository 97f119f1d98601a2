#include "model/codec_options.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace skipswarm::model {

const char* CodecName(Codec codec) {
  switch (codec) {
    case Codec::kRawFp32: return "fp32";
    case Codec::kFp16: return "fp16";
    case Codec::kBf16: return "bf16";
    case Codec::kInt8Blockwise: return "int8";
    case Codec::kRawInt64: return "int64";
    default: return "unknown";
  }
}

absl::StatusOr<Codec> ParseCodec(absl::string_view name) {
  for (Codec c : {Codec::kRawFp32, Codec::kFp16, Codec::kBf16, Codec::kInt8Blockwise}) {
    if (name == CodecName(c)) return c;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown codec '", name, "' (want fp32, fp16, bf16 or int8)"));
}

double EncodedFloatBytes(const EncodeOptions& options, double numel) {
  switch (options.codec) {
    case Codec::kFp16:
    case Codec::kBf16:
      return 2 * numel;
    case Codec::kInt8Blockwise:  // one float32 scale per block, then int8s
      return numel + 4 * std::ceil(numel / std::max<uint32_t>(1, options.block_size));
    default:
      return 4 * numel;
  }
}

}  // namespace skipswarm::model
