// AveragingCodec: what one replica's contribution to a stage average looks
// like after the codec of --avg_codec (model/averaging_options.h), with
// error feedback for the sparse and low-rank codecs.
//
//   AveragingCodec codec(spec, num_params, /*seed=*/stage);
//   SS_ASSIGN_OR_RETURN(AveragingCodec::Result r, codec.Compress(flat));
//   ... contribute r.decoded (what every peer decodes), count r.bytes ...
//
// Codecs: fp32 (the vector as is), bf16 and int8 blockwise (the wire codec,
// tensor_codec.h: encoded and decoded again), topk:F (the ceil(F * n)
// largest magnitudes, index + value each) and powersgd:R (one power
// iteration of a rank-R factorisation of the vector viewed as a near-square
// matrix, PowerSgdShape; the right factor is kept as the next call's warm
// start).
//
// Note [Error feedback]: topk and powersgd drop most of the vector; what
// they drop is kept in residual() and added to the next vector before it is
// compressed, so every coordinate is sent eventually and the sum of what was
// sent over many calls tracks the sum of the inputs (the residual is the
// whole difference). bf16 and int8 keep one too: blockwise int8 rounds
// every entry below its block's absmax / 254 to zero, always the same small
// entries (norm weights, rare tokens' rows), which AdamW's per-entry scaling
// would otherwise never see (measured: H = 1 int8 without it ended 5% above
// fp32's validation loss, node/train/README.md). The residual is part of a
// replica's averaging state: state transfer carries it (Note [Averaging
// state] in outer_optimizer.h).
//
// Note [Thinned uploads]: Compress(flat, keep) with keep < 1 and int8 sends
// only the ceil(keep x blocks) blocks of the block grid (block_size, from
// element 0) with the largest L2 norm after the residual is added; the
// other blocks decode to zeros and stay whole in the residual, so they go
// out in a later round (error feedback, as for top-k). A member on a slow
// uplink sends fewer bytes that way (node/train/upload_budget.h chooses
// keep; node/train/shard_codec.h does not send the zero blocks). Other
// codecs ignore keep.
//
// Thread rule: thread-compatible.
#ifndef SKIPSWARM_MODEL_AVG_CODEC_H_
#define SKIPSWARM_MODEL_AVG_CODEC_H_

#include <ATen/ATen.h>

#include <cstdint>

#include "absl/status/statusor.h"
#include "model/averaging_options.h"

namespace skipswarm::model {

class AveragingCodec {
 public:
  struct Result {
    at::Tensor decoded;  // float32 [numel]: what the peers average
    int64_t bytes = 0;   // payload bytes this contribution takes on a wire
    // powersgd: decoded = the first numel of P Q^T (rows x cols); the
    // factors travel instead of `decoded` (node/train/shard_codec.h).
    at::Tensor p;  // [rows, rank]
    at::Tensor q;  // [cols, rank]
  };

  AveragingCodec(const AvgCodecSpec& spec, int64_t numel, uint64_t seed);

  // `flat`: float32 vector of numel elements. InvalidArgument on a wrong
  // size, a non-finite input (the residual is left unchanged then).
  // `keep` in (0, 1]: Note [Thinned uploads] (int8 only; out of range: 1).
  absl::StatusOr<Result> Compress(const at::Tensor& flat, double keep = 1.0);

  const AvgCodecSpec& spec() const { return spec_; }
  int64_t numel() const { return numel_; }
  bool has_residual() const { return IsLossy(spec_); }
  // Note [Error feedback]; zeros for codecs without one.
  const at::Tensor& residual() const { return residual_; }
  absl::Status SetResidual(const at::Tensor& residual);

 private:
  at::Tensor TopK(const at::Tensor& v) const;
  at::Tensor LowRank(const at::Tensor& v, Result* r);
  // Note [Thinned uploads]: `v` with all but the kept blocks zeroed; sets
  // *dropped to the blocks zeroed.
  at::Tensor KeepLargestBlocks(const at::Tensor& v, double keep, int64_t* dropped) const;

  AvgCodecSpec spec_;
  int64_t numel_;
  at::Tensor residual_;  // float32 [numel]
  at::Tensor q_;         // powersgd: [cols, rank] warm start
};

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_AVG_CODEC_H_
