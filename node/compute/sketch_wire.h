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
#include <vector>

#include "absl/status/statusor.h"
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

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_COMPUTE_SKETCH_WIRE_H_
