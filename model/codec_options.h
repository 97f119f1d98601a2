// The wire codecs' names and options, and the payload size they give, apart
// from the codec itself (tensor_codec.h) so that code which only sizes or
// names an encoding (a planner's hop cost, a flag) does not link libtorch.
// Enum values equal proto/common.proto's DType and Codec.
//
//   model::EncodeOptions o{model::Codec::kInt8Blockwise};
//   double bytes = model::EncodedFloatBytes(o, samples * seq_len * d_model);
//
// Thread rule: pure functions.
#ifndef SKIPSWARM_MODEL_CODEC_OPTIONS_H_
#define SKIPSWARM_MODEL_CODEC_OPTIONS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace skipswarm::model {

enum class WireDType : int {
  kUnspecified = 0, kFloat32 = 1, kFloat16 = 2, kBFloat16 = 3, kInt8 = 4, kInt64 = 5,
};
enum class Codec : int {
  kUnspecified = 0, kRawFp32 = 1, kFp16 = 2, kBf16 = 3, kInt8Blockwise = 4, kRawInt64 = 5,
};
const char* CodecName(Codec codec);
// Parses "fp32", "fp16", "bf16", "int8" (the flag spelling).
absl::StatusOr<Codec> ParseCodec(absl::string_view name);

struct EncodeOptions {
  Codec codec = Codec::kRawFp32;
  uint32_t block_size = 256;  // kInt8Blockwise
};

// Payload bytes of `numel` float elements encoded with `options` (the sizes
// EncodeTensor produces for the float codecs).
double EncodedFloatBytes(const EncodeOptions& options, double numel);

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_CODEC_OPTIONS_H_
