#include "node/compute/timed_stage_compute.h"

#include <optional>

#include "common/sim_clock.h"
#include "gtest/gtest.h"

namespace skipswarm::node {
namespace {

TEST(TimedStageComputeTest, TasksTakeModelledTime) {
  common::SimClock clock;
  TimedStageCompute compute(&clock, {.stage = 2, .forward = absl::Milliseconds(100),
                                     .payload_bytes = 64});
  std::optional<absl::StatusOr<WireTensor>> out;
  compute.Forward(7, WireTensor{}, [&](absl::StatusOr<WireTensor> r) { out = std::move(r); });
  clock.Advance(absl::Milliseconds(99));
  EXPECT_FALSE(out.has_value());
  clock.Advance(absl::Milliseconds(1));
  ASSERT_TRUE(out.has_value() && out->ok());
  EXPECT_EQ((*out)->payload.size(), 64u);
  EXPECT_EQ(compute.pending(), 1u);

  out.reset();
  compute.Backward(7, WireTensor{}, [&](absl::StatusOr<WireTensor> r) { out = std::move(r); });
  clock.Advance(absl::Milliseconds(149));
  EXPECT_FALSE(out.has_value());
  clock.Advance(absl::Milliseconds(1));
  ASSERT_TRUE(out.has_value() && out->ok());
  EXPECT_EQ(compute.pending(), 0u);
  EXPECT_EQ(compute.TakeGradients()->visits, 1);
}

TEST(TimedStageComputeTest, RejectsDuplicateAndUnknownMicroBatches) {
  common::SimClock clock;
  TimedStageCompute compute(&clock, {.stage = 1});
  std::vector<absl::Status> results;
  auto record = [&](absl::StatusOr<WireTensor> r) { results.push_back(r.status()); };
  compute.Forward(1, WireTensor{}, record);
  compute.Forward(1, WireTensor{}, record);
  compute.Backward(9, WireTensor{}, record);
  compute.Start(2, MicroBatchData{}, record);
  clock.Advance(absl::Seconds(1));
  ASSERT_EQ(results.size(), 4u);
  int ok = 0, dup = 0, missing = 0, precondition = 0;
  for (const absl::Status& s : results) {
    ok += s.ok();
    dup += absl::IsAlreadyExists(s);
    missing += absl::IsNotFound(s);
    precondition += absl::IsFailedPrecondition(s);
  }
  EXPECT_EQ(ok, 1);
  EXPECT_EQ(dup, 1);
  EXPECT_EQ(missing, 1);
  EXPECT_EQ(precondition, 1);
}

TEST(TimedStageComputeTest, VerifyOnlySketchesTakeAForwardOrAForwardAndABackward) {
  common::SimClock clock;
  TimedStageCompute compute(&clock, {.stage = 2, .forward = absl::Milliseconds(100),
                                     .payload_bytes = 64});
  std::optional<absl::StatusOr<model::OutputSketch>> fwd, bwd;
  compute.SketchForward(WireTensor{}, 5, [&](absl::StatusOr<model::OutputSketch> r) {
    fwd = std::move(r);
  });
  compute.SketchBackward(WireTensor{}, WireTensor{}, 6,
                         [&](absl::StatusOr<model::OutputSketch> r) { bwd = std::move(r); });
  clock.Advance(absl::Milliseconds(99));
  EXPECT_FALSE(fwd.has_value());
  clock.Advance(absl::Milliseconds(1));
  ASSERT_TRUE(fwd.has_value() && fwd->ok());
  EXPECT_EQ((*fwd)->shape, (std::vector<int64_t>{16}));  // Dummy()'s shape
  EXPECT_EQ((*fwd)->seed, 5u);
  EXPECT_EQ((*fwd)->projections.size(), static_cast<size_t>(model::kDefaultSketchProjections));
  clock.Advance(absl::Milliseconds(149));
  EXPECT_FALSE(bwd.has_value());
  clock.Advance(absl::Milliseconds(1));
  ASSERT_TRUE(bwd.has_value() && bwd->ok());
  // Nothing pending, no visit.
  EXPECT_EQ(compute.pending(), 0u);
  EXPECT_EQ(compute.TakeGradients()->visits, 0);

  TimedStageCompute data(&clock, {.stage = 0});
  fwd.reset();
  data.SketchForward(WireTensor{}, 1, [&](absl::StatusOr<model::OutputSketch> r) {
    fwd = std::move(r);
  });
  clock.Advance(absl::Seconds(1));
  ASSERT_TRUE(fwd.has_value());
  EXPECT_TRUE(absl::IsFailedPrecondition(fwd->status()));
}

TEST(TimedStageComputeTest, StepChangesDigestEquallyOnReplicas) {
  common::SimClock clock;
  TimedStageCompute a(&clock, {.stage = 3}), b(&clock, {.stage = 3});
  EXPECT_EQ(a.ParamsDigest(), b.ParamsDigest());
  ASSERT_TRUE(a.ApplyUpdate(std::vector<float>(16, 0.f), 1).ok());
  EXPECT_NE(a.ParamsDigest(), b.ParamsDigest());
  ASSERT_TRUE(b.ApplyUpdate(std::vector<float>(16, 0.f), 1).ok());
  EXPECT_EQ(a.ParamsDigest(), b.ParamsDigest());
  EXPECT_FALSE(a.ApplyUpdate(std::vector<float>(3, 0.f), 1).ok());
}

}  // namespace
}  // namespace skipswarm::node
