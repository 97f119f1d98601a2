// ShardCodec: how one shard of a stage average travels between replicas
// (Note [Encoded shards]): the bytes a reduce-scatter part or an all-gather
// shard takes on the wire under --avg_codec, and their checked decoding.
// No libtorch: it works on float spans the compute already passed through
// model/avg_codec.h.
//
//   std::string wire = EncodeShard(spec, part.data(), n, offset, factors);
//   SS_ASSIGN_OR_RETURN(std::vector<float> v,
//                       DecodeShard(spec, wire, n, offset, total));
//
// Note [Encoded shards]: a replica's contribution has already been through
// the averaging codec (with its error feedback, avg_codec.h), so what it
// sends for elements [offset, offset + n) of the stage's flat vector can be
// re-encoded (nearly) without loss:
//  * bf16: the contribution is bf16 values; 2 bytes each, exact.
//  * int8: blocks aligned to multiples of the block size in the *stage's*
//    index space (as the codec cut them), a float scale per block and an
//    int8 per element. Whole blocks decode to the codec's values up to one
//    ulp of the scale; the at most two blocks a shard boundary cuts are
//    re-scaled to the part they hold. Blocks that are all zeros (a thinned
//    contribution, Note [Thinned uploads] in model/avg_codec.h) are not
//    sent when that is smaller (kInt8Blocks: the kept blocks' indices,
//    then their scales and values).
//  * topk: (index, value) pairs of the non-zeros, exact.
//  * powersgd: the rank-r factors, P's rows that the shard touches and the
//    whole Q (PowerSgdShape's matrix), decoded as dot products.
//  * fp32 (and anything that would not be smaller): the floats as they are.
// An all-gather shard is a sum over replicas: bf16 rounds it, int8
// re-quantizes it with error feedback kept by the shard's owner
// (ShardedReduce), top-k sums stay sparse (at most R k non-zeros), and
// PowerSGD sends every part's factors (kLowRankSum). Every replica, the
// owner included, uses what the bytes decode to, so all replicas still
// step on identical values.
//
// Decoding is for untrusted bytes: the format must be one the local codec
// can have sent (a peer cannot make this node run a rank-4096 PowerSGD
// decode), every size must match what the shard's known element count
// implies, sparse indices must be increasing and in range, scales and
// values finite; anything else is INVALID_ARGUMENT naming what was wrong.
//
// Thread rule: pure functions.
#ifndef SKIPSWARM_NODE_TRAIN_SHARD_CODEC_H_
#define SKIPSWARM_NODE_TRAIN_SHARD_CODEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/averaging_options.h"

namespace skipswarm::node {

// The first byte of every encoded shard.
enum class ShardFormat : uint8_t {
  kFp32 = 0,
  kBf16 = 1,
  kInt8 = 2,
  kSparse = 3,
  kLowRank = 4,
  kLowRankSum = 5,
  kInt8Blocks = 6,
};

// The largest encoded shard of n elements DecodeShard accepts (an encoder
// that cannot beat fp32 sends fp32).
inline uint64_t MaxShardBytes(int64_t n) { return 4 * static_cast<uint64_t>(n) + 64; }

// Elements [offset, offset + n) of a stage's flat vector, `v`, as they go
// on the wire under `spec`. `factors` (may be null) are the PowerSGD
// factors `v` was decoded from.
std::string EncodeShard(const model::AvgCodecSpec& spec, const float* v, int64_t n, int64_t offset,
                        const model::LowRankFactors* factors);
// A sum of shards: the all-gather of `reduced` (the owner's sum). For int8,
// `residual` (n floats, may be null) is the owner's error feedback for
// these elements: added before and updated after. For powersgd, `parts`
// are the summed parts' encodings in the order they were added (used when
// every one is kLowRank).
std::string EncodeReducedShard(const model::AvgCodecSpec& spec, const float* reduced, int64_t n,
                               int64_t offset, float* residual,
                               const std::vector<absl::string_view>& parts);
// n floats from a peer's bytes; `total` is the stage's element count.
absl::StatusOr<std::vector<float>> DecodeShard(const model::AvgCodecSpec& spec,
                                               absl::string_view payload, int64_t n,
                                               int64_t offset, int64_t total);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_SHARD_CODEC_H_
