#include "node/compute/sketch_wire.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace skipswarm::node {

SketchLimits ActivationSketchLimits(const model::ModelConfig& config, int64_t max_samples) {
  SketchLimits l;
  l.max_shape = {max_samples, config.seq_len, config.d_model};
  return l;
}

proto::OutputSketch SketchToProto(const model::OutputSketch& sketch) {
  proto::OutputSketch w;
  for (int64_t d : sketch.shape) w.add_shape(d);
  w.set_seed(sketch.seed);
  w.set_norm(sketch.norm);
  w.mutable_projections()->Add(sketch.projections.begin(), sketch.projections.end());
  return w;
}

absl::StatusOr<model::OutputSketch> SketchFromProto(const proto::OutputSketch& wire,
                                                    const SketchLimits& limits) {
  auto bad = [](auto... parts) {
    return absl::InvalidArgumentError(absl::StrCat("sketch: ", parts...));
  };
  // Counts first: nothing below is sized by a number the peer chose
  // before it is bounded.
  if (static_cast<size_t>(wire.shape_size()) != limits.max_shape.size()) {
    return bad("rank ", wire.shape_size(), ", want ", limits.max_shape.size());
  }
  const int k = wire.projections_size();
  if (k < 1 || k > std::min(limits.max_projections, model::kMaxSketchProjections)) {
    return bad(k, " projections, want 1..", limits.max_projections);
  }
  for (int i = 0; i < wire.shape_size(); ++i) {
    if (wire.shape(i) < 1 || wire.shape(i) > limits.max_shape[i]) {
      return bad("dimension ", i, " is ", wire.shape(i), ", want 1..", limits.max_shape[i]);
    }
  }
  if (!std::isfinite(wire.norm()) || wire.norm() < 0) return bad("norm ", wire.norm());
  for (double p : wire.projections()) {
    if (!std::isfinite(p)) return bad("a projection is not finite");
  }
  model::OutputSketch s;
  s.shape.assign(wire.shape().begin(), wire.shape().end());
  s.seed = wire.seed();
  s.norm = wire.norm();
  s.projections.assign(wire.projections().begin(), wire.projections().end());
  return s;
}

proto::SketchAnswer AnswerToProto(const SketchAnswer& answer) {
  proto::SketchAnswer w;
  w.set_origin(answer.visit.origin.Bytes());
  w.set_iteration(answer.visit.iteration);
  w.set_mb_id(answer.visit.mb);
  w.set_hop_index(answer.visit.hop_index);
  w.set_checked(answer.visit.checked.Bytes());
  *w.mutable_sketch() = SketchToProto(answer.sketch);
  return w;
}

absl::StatusOr<SketchAnswer> AnswerFromProto(const proto::SketchAnswer& wire,
                                             const SketchLimits& limits) {
  auto bad = [](auto... parts) {
    return absl::InvalidArgumentError(absl::StrCat("sketch answer: ", parts...));
  };
  SketchAnswer a;
  absl::StatusOr<common::NodeId> origin = common::NodeId::FromBytes(wire.origin());
  if (!origin.ok()) return bad("origin: ", origin.status().message());
  absl::StatusOr<common::NodeId> checked = common::NodeId::FromBytes(wire.checked());
  if (!checked.ok()) return bad("checked: ", checked.status().message());
  if (wire.hop_index() < 1 || wire.hop_index() >= kMaxCheckedHops) {
    return bad("hop_index ", wire.hop_index(), ", want 1..", kMaxCheckedHops - 1);
  }
  if (!wire.has_sketch()) return bad("no sketch");
  absl::StatusOr<model::OutputSketch> sketch = SketchFromProto(wire.sketch(), limits);
  if (!sketch.ok()) return sketch.status();
  a.visit = CheckedVisit{*origin, wire.iteration(), wire.mb_id(), wire.hop_index(), *checked};
  a.sketch = *std::move(sketch);
  return a;
}

}  // namespace skipswarm::node
