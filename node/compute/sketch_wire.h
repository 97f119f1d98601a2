// OutputSketch <-> proto::OutputSketch (proto/verify.proto), with the
// receiver's checks: a sketch comes from a peer, so every field is bounded
// before anything is sized or copied from it (Note [Decoder checks] in
// model/tensor_codec.cc is the same rule for tensors).
//
//   proto::OutputSketch wire = SketchToProto(sketch);            // on Y
//   SS_ASSIGN_OR_RETURN(model::OutputSketch s,
//                       SketchFromProto(wire, ActivationSketchLimits(config, 256)));
//
// Thread rule: pure functions.
#ifndef SKIPSWARM_NODE_COMPUTE_SKETCH_WIRE_H_
#define SKIPSWARM_NODE_COMPUTE_SKETCH_WIRE_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/node_id.h"
#include "model/model_config.h"
#include "model/output_sketch.h"
#include "proto/verify.pb.h"

namespace skipswarm::node {

struct SketchLimits {
  // Largest accepted dimension, per axis; the sketch's rank must equal
  // max_shape's size.
  std::vector<int64_t> max_shape;
  int max_projections = model::kMaxSketchProjections;
};

// An activation's (or its gradient's) limits: [max_samples, seq_len,
// d_model].
SketchLimits ActivationSketchLimits(const model::ModelConfig& config, int64_t max_samples);

proto::OutputSketch SketchToProto(const model::OutputSketch& sketch);

// InvalidArgument for a rank or a dimension out of `limits`, a projection
// count outside 1..max_projections, or a norm or projection that is
// negative (norm) or not finite. What passes is a sketch CheckAgainstSketch
// accepts as well formed.
absl::StatusOr<model::OutputSketch> SketchFromProto(const proto::OutputSketch& wire,
                                                    const SketchLimits& limits);

// One checked visit: the micro-batch (origin, iteration, id), X's hop in its
// route and X. What the hop after X files X's output and Y's sketch under.
struct CheckedVisit {
  common::NodeId origin;
  uint64_t iteration = 0;
  uint64_t mb = 0;
  uint32_t hop_index = 0;
  common::NodeId checked;

  friend bool operator==(const CheckedVisit& a, const CheckedVisit& b) {
    return a.origin == b.origin && a.iteration == b.iteration && a.mb == b.mb &&
           a.hop_index == b.hop_index && a.checked == b.checked;
  }
  template <typename H>
  friend H AbslHashValue(H h, const CheckedVisit& v) {
    return H::combine(std::move(h), v.origin, v.iteration, v.mb, v.hop_index, v.checked);
  }
};

struct SketchAnswer {
  CheckedVisit visit;
  model::OutputSketch sketch;
};

proto::SketchAnswer AnswerToProto(const SketchAnswer& answer);

// The route length limit of node/transport/frame.h (kMaxRouteHops).
inline constexpr uint32_t kMaxCheckedHops = 64;

// InvalidArgument for a node id that is not 32 bytes, a hop_index of 0 or
// >= kMaxCheckedHops (stage 0 runs at the origin and is never checked), a
// missing sketch, or whatever SketchFromProto refuses in it.
absl::StatusOr<SketchAnswer> AnswerFromProto(const proto::SketchAnswer& wire,
                                             const SketchLimits& limits);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_COMPUTE_SKETCH_WIRE_H_
