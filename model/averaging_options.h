// How the replicas of a stage average (Note [Outer steps] in
// node/train/node_trainer.h): every iteration (outer_every = 1, the
// gradient average of docs/DESIGN.md §6) or DiLoCo-style every H iterations
// (local AdamW steps in between, then an outer Nesterov step on the
// averaged pseudo-gradient), and the codec the averaged vector goes through.
// Without libtorch: flags, the planner's cost model and the node's options
// include this; the maths is model/outer_optimizer.h and model/avg_codec.h.
//
//   SS_ASSIGN_OR_RETURN(AvgCodecSpec c, ParseAvgCodec("topk:0.01"));
//   double bytes = AveragedBytes(c, stage_params);   // one replica, one sync
//
// Thread rule: pure functions.
#ifndef SKIPSWARM_MODEL_AVERAGING_OPTIONS_H_
#define SKIPSWARM_MODEL_AVERAGING_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace skipswarm::model {

enum class AvgCodecKind { kFp32, kBf16, kInt8, kTopK, kPowerSgd };

struct AvgCodecSpec {
  AvgCodecKind kind = AvgCodecKind::kFp32;
  double topk_fraction = 0.01;  // kTopK: share of elements kept, (0, 1]
  int rank = 4;                 // kPowerSgd: rank of the factors
  uint32_t block_size = 256;    // kInt8: the wire codec's block
};

// Bytes one of R replicas pushes in one sharded reduce of a vector of
// `numel` elements under `spec`, as node/train/shard_codec.h encodes the
// parts and reduced shards (Note [Encoded shards]): 2 (R-1)/R x
// AveragedBytes for fp32, bf16 and int8; top-k's reduced shards hold up to
// R times its parts' entries, PowerSGD sends Q with every part and every
// part's factors with every reduced shard (each capped at fp32's size).
double WireBytesPerReplica(const AvgCodecSpec& spec, double numel, int replicas);

// A rows x cols matrix P Q^T whose row-major flattening's first elements
// are a PowerSGD contribution (PowerSgdShape): what avg_codec.h's powersgd
// decodes from, and what an encoded shard carries (node/train/
// shard_codec.h).
struct LowRankFactors {
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t rank = 0;
  std::vector<float> p;  // rows x rank, row-major
  std::vector<float> q;  // cols x rank, row-major
};

struct AveragingOptions {
  // H: local optimiser steps between averages. 1 = gradients are averaged
  // every iteration (today's behaviour); > 1 = pseudo-gradients are
  // averaged every H steps and applied by the outer optimiser below.
  int64_t outer_every = 1;
  // Note [Overlapped sync] (node/train/node_trainer.h): with H > 1, the
  // averaging of round k runs while the next H steps compute and is applied
  // at the next sync (one round late), instead of stopping every replica
  // until the slowest member's uplink has carried it.
  bool overlap = false;
  // Outer SGD with Nesterov momentum (DiLoCo's defaults); used when H > 1.
  double outer_lr = 0.7;
  double outer_momentum = 0.9;
  AvgCodecSpec codec;
  // Note [Late members] (node/train/sharded_reduce.h), H > 1: an outer
  // sync's round closes without the members still late after
  // max(sync_deadline_min_s, sync_deadline_factor x the expected upload
  // time: 2 x the encoded pseudo-gradient / the group's median measured
  // uplink), plus, with overlap, the time of the last H steps; factor 0:
  // every member is waited for.
  double sync_deadline_factor = 4;
  double sync_deadline_min_s = 10;
  // Note [Thinned uploads] (model/avg_codec.h, node/train/upload_budget.h),
  // H > 1 with int8: a member whose sync upload would outlast its peers'
  // (with overlap: the H steps') sends only its largest blocks, at least
  // this fraction of them; 1: always every block. Each member's own.
  double upload_floor = 0.25;
};

// What every replica of a swarm must share to average together, as text
// ("H=32 int8 overlap", "H=1 fp32"): the gossip records carry it
// (NodeRecord.averaging_id) and members refuse records that differ. The
// outer lr / momentum and the deadline are not in it (the manifest fixes
// the former; the latter is each member's own patience).
std::string AveragingIdentity(const AveragingOptions& options);

// "fp32", "bf16", "int8", "topk:F" (0 < F <= 1), "powersgd:R" (R >= 1).
absl::StatusOr<AvgCodecSpec> ParseAvgCodec(absl::string_view text);
std::string AvgCodecName(const AvgCodecSpec& spec);
// InvalidArgument naming the flag for an out-of-range value.
absl::Status ValidateAveraging(const AveragingOptions& options);

// true when the codec changes the averaged vector (everything but fp32).
inline bool IsLossy(const AvgCodecSpec& spec) { return spec.kind != AvgCodecKind::kFp32; }

// Payload bytes one replica contributes per average of `numel` floats
// (the sizes avg_codec.h reports). topk: 4-byte index + 4-byte value per
// kept element; powersgd: the two rank-R factors of the vector laid out as
// a near-square matrix (avg_codec.h), fp32.
double AveragedBytes(const AvgCodecSpec& spec, double numel);

// PowerSGD's matrix view of a flat vector of `numel` elements: rows x cols
// with rows = ceil(sqrt(numel)), cols = ceil(numel / rows) (zero padded).
void PowerSgdShape(int64_t numel, int64_t* rows, int64_t* cols);

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_AVERAGING_OPTIONS_H_
