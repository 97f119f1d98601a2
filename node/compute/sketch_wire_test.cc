#include "node/compute/sketch_wire.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <limits>
#include <vector>

namespace skipswarm::node {
namespace {

model::OutputSketch DefaultSketch() {
  // The default model's activation: 4 x 128 x 256.
  std::vector<float> v(4 * 128 * 256);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 37) % 101) / 50.f - 1.f;
  return model::SketchOutput(v, {4, 128, 256}, 77);
}

SketchLimits Limits() {
  model::ModelConfig c;  // the default model: seq_len 128, d_model 256
  return ActivationSketchLimits(c, 4);
}

TEST(SketchWireTest, RoundTripsExactly) {
  const model::OutputSketch s = DefaultSketch();
  const proto::OutputSketch wire = SketchToProto(s);
  absl::StatusOr<model::OutputSketch> back = SketchFromProto(wire, Limits());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->shape, s.shape);
  EXPECT_EQ(back->seed, s.seed);
  EXPECT_EQ(back->norm, s.norm);
  EXPECT_EQ(back->projections, s.projections);
  std::printf("FIGURE sketch_wire_bytes=%zu\n", wire.SerializeAsString().size());
  EXPECT_LT(wire.SerializeAsString().size(), 2200u);
}

TEST(SketchWireTest, RefusesEveryMalformedField) {
  const proto::OutputSketch good = SketchToProto(DefaultSketch());
  const auto refused = [&](auto mutate) {
    proto::OutputSketch w = good;
    mutate(w);
    return SketchFromProto(w, Limits()).status().code() == absl::StatusCode::kInvalidArgument;
  };
  EXPECT_TRUE(refused([](proto::OutputSketch& w) { w.add_shape(1); }));
  EXPECT_TRUE(refused([](proto::OutputSketch& w) { w.set_shape(0, 5); }));
  EXPECT_TRUE(refused([](proto::OutputSketch& w) { w.set_shape(1, 0); }));
  EXPECT_TRUE(refused([](proto::OutputSketch& w) { w.set_shape(2, -256); }));
  EXPECT_TRUE(refused([](proto::OutputSketch& w) { w.clear_projections(); }));
  EXPECT_TRUE(refused([](proto::OutputSketch& w) {
    for (int i = 0; i < model::kMaxSketchProjections; ++i) w.add_projections(0);
  }));
  EXPECT_TRUE(refused([](proto::OutputSketch& w) { w.set_norm(-1); }));
  EXPECT_TRUE(refused(
      [](proto::OutputSketch& w) { w.set_norm(std::numeric_limits<double>::infinity()); }));
  EXPECT_TRUE(refused([](proto::OutputSketch& w) {
    w.set_projections(5, std::numeric_limits<double>::quiet_NaN());
  }));
  // A smaller micro-batch or sequence is fine.
  proto::OutputSketch shorter = good;
  shorter.set_shape(0, 2);
  shorter.set_shape(1, 64);
  EXPECT_TRUE(SketchFromProto(shorter, Limits()).ok());
}

SketchAnswer DefaultAnswer() {
  return SketchAnswer{CheckedVisit{common::NodeId::ForName("origin"), 7, 3, 1,
                                   common::NodeId::ForName("x")},
                      DefaultSketch()};
}

TEST(SketchWireTest, AnswerRoundTrips) {
  const SketchAnswer a = DefaultAnswer();
  const proto::SketchAnswer wire = AnswerToProto(a);
  absl::StatusOr<SketchAnswer> back = AnswerFromProto(wire, Limits());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->visit == a.visit);
  EXPECT_EQ(back->sketch.projections, a.sketch.projections);
  std::printf("FIGURE sketch_answer_bytes=%zu\n", wire.SerializeAsString().size());
}

TEST(SketchWireTest, AnswerRefusesEveryMalformedField) {
  const proto::SketchAnswer good = AnswerToProto(DefaultAnswer());
  const auto refused = [&](auto mutate) {
    proto::SketchAnswer w = good;
    mutate(w);
    return AnswerFromProto(w, Limits()).status().code() == absl::StatusCode::kInvalidArgument;
  };
  EXPECT_TRUE(refused([](proto::SketchAnswer& w) { w.set_origin("short"); }));
  EXPECT_TRUE(refused([](proto::SketchAnswer& w) { w.clear_checked(); }));
  EXPECT_TRUE(refused([](proto::SketchAnswer& w) { w.set_hop_index(0); }));
  EXPECT_TRUE(refused([](proto::SketchAnswer& w) { w.set_hop_index(kMaxCheckedHops); }));
  EXPECT_TRUE(refused([](proto::SketchAnswer& w) { w.clear_sketch(); }));
  EXPECT_TRUE(refused([](proto::SketchAnswer& w) { w.mutable_sketch()->set_norm(-1); }));
  EXPECT_TRUE(AnswerFromProto(good, Limits()).ok());
}

}  // namespace
}  // namespace skipswarm::node
