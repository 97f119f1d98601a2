// Wire codec: tensors <-> bytes plus the metadata a receiver needs to check
// them. The enums and EncodeOptions are in codec_options.h (values equal
// proto/common.proto's DType and Codec); TensorMeta mirrors its TensorMeta
// message field by field, so the node layer maps one to the other with
// static_casts.
//
//   SS_ASSIGN_OR_RETURN(EncodedTensor enc,
//                       EncodeTensor(activation, {Codec::kInt8Blockwise}));
//   ... send enc.meta and enc.payload ...
//   DecodeExpectations want;
//   want.shape = {-1, seq_len, d_model};         // -1: any size in range
//   SS_ASSIGN_OR_RETURN(at::Tensor x, DecodeTensor(meta, payload, want));
//
// Codecs (activations and their gradients are float32 in the model):
//   kRawFp32        float32 as is (lossless)
//   kFp16 / kBf16   half / bfloat16 (round to nearest even)
//   kInt8Blockwise  per block of block_size elements one float32 scale
//                   (absmax / 127) then int8 values; payload = scales, values
//   kRawInt64       int64 token ids (lossless)
// All little-endian. Decoding trusts nothing in the metadata or the payload
// (see Note [Decoder checks] in tensor_codec.cc); every failure is a Status.
//
// Thread rule: pure functions.
#ifndef SKIPSWARM_MODEL_TENSOR_CODEC_H_
#define SKIPSWARM_MODEL_TENSOR_CODEC_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/codec_options.h"

namespace skipswarm::model {

struct TensorMeta {
  WireDType dtype = WireDType::kUnspecified;  // logical dtype of the decoded tensor
  std::vector<int64_t> shape;
  Codec codec = Codec::kUnspecified;
  uint64_t payload_bytes = 0;
  uint32_t payload_crc32c = 0;
  uint32_t block_size = 0;  // kInt8Blockwise only
};

struct EncodedTensor {
  TensorMeta meta;
  std::string payload;
};

inline constexpr uint64_t kMaxPayloadBytes = 256ull << 20;  // proto limit
inline constexpr int kMaxRank = 8;

// Encodes a float tensor (float codecs) or an integer tensor (kRawInt64),
// any device, any layout. InvalidArgument on a dtype/codec mismatch, an
// empty tensor or one over kMaxPayloadBytes.
absl::StatusOr<EncodedTensor> EncodeTensor(const at::Tensor& tensor,
                                           const EncodeOptions& options = {});

enum class NonFinitePolicy { kReject, kCount };

struct DecodeExpectations {
  WireDType dtype = WireDType::kFloat32;  // required logical dtype
  // Required shape; -1 accepts any dim in [1, max_dim]. Empty: any shape of
  // rank 1..kMaxRank.
  std::vector<int64_t> shape;
  int64_t max_dim = int64_t{1} << 31;
  uint64_t max_payload_bytes = kMaxPayloadBytes;
  int64_t max_elements = int64_t{1} << 28;
  // Codecs the receiver accepts; empty = any codec valid for `dtype`.
  std::vector<Codec> allowed_codecs;
  NonFinitePolicy non_finite = NonFinitePolicy::kReject;
};

struct DecodeStats {
  int64_t non_finite = 0;  // NaN/Inf elements seen (kCount policy)
};

// Decodes `payload` described by `meta` into a CPU tensor (float32 or
// int64). InvalidArgument for anything inconsistent or unexpected,
// ResourceExhausted over the size limits, DataLoss on a checksum mismatch.
absl::StatusOr<at::Tensor> DecodeTensor(const TensorMeta& meta, absl::string_view payload,
                                        const DecodeExpectations& expect,
                                        DecodeStats* stats = nullptr);

// Same checks; for the lossless raw codecs the tensor takes over `payload`'s
// buffer instead of copying it (zero-copy). Other codecs decode as above.
absl::StatusOr<at::Tensor> DecodeTensor(const TensorMeta& meta, std::string&& payload,
                                        const DecodeExpectations& expect,
                                        DecodeStats* stats = nullptr);

// Error a codec introduced: max |a - b| and ||a - b|| / ||a||.
struct CodecError {
  double max_abs = 0;
  double rel_l2 = 0;
};
CodecError MeasureCodecError(const at::Tensor& original, const at::Tensor& decoded);

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_TENSOR_CODEC_H_
