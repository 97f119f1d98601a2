// Note [Group of one] (node_trainer.cc): a stage with no other replica
// steps its gradients where they are (StageState::ApplyLocalUpdate): the
// trainer takes no gradient vector from it (on a GPU: no copy to the host
// and back), takes no digest and reports no averaged bytes. A stage with
// two replicas still averages through the group. Note [Lone outer
// replica]: the same with outer steps (H > 1), whose syncs run no round
// when alone.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "node/compute/forwarding_stage_compute.h"
#include "node/compute/timed_stage_compute.h"
#include "node/train/data_source.h"
#include "node/train/outer_step_recorder.h"
#include "node/train/test_swarm.h"

namespace skipswarm::node {
namespace {

constexpr int64_t kParams = 1000;

// Counts what the trainer takes out of the compute: gradient vectors
// (TakeGradients: a host copy of every gradient) and digests.
class CountingCompute final : public ForwardingStageCompute {
 public:
  CountingCompute(common::Clock* clock, int stage)
      : ForwardingStageCompute(std::make_unique<TimedStageCompute>(
            clock, TimedStageCompute::Options{.stage = stage, .num_params = kParams})) {}
  absl::StatusOr<GradientSum> TakeGradients() override {
    ++gradient_vectors;
    return inner()->TakeGradients();
  }
  uint64_t ParamsDigest() override {
    ++digests;
    return inner()->ParamsDigest();
  }
  int gradient_vectors = 0;
  int digests = 0;
};

struct Made {
  int node;
  int stage;
  CountingCompute* compute;
};

ComputeFactory Counting(std::vector<Made>* made) {
  return [made](int node, int stage, common::Clock* clock,
                TaskRunner*) -> std::unique_ptr<StageCompute> {
    auto c = std::make_unique<CountingCompute>(clock, stage);
    made->push_back({node, stage, c.get()});
    return c;
  };
}

TEST(GroupOfOneTest, ALoneReplicaStepsInPlaceWithoutAveragingTraffic) {
  SyntheticDataSource data(2, 8, 32);
  TestSwarmOptions o;
  o.node_stages = {{0}, {1}, {2}, {2}};  // stages 0 and 1 alone, stage 2 twice
  o.num_stages = 3;
  o.driver.mbs_per_iteration = 4;
  std::vector<Made> made;
  TestSwarm swarm(o, Counting(&made), &data);
  constexpr int kIterations = 3;
  ASSERT_TRUE(swarm.Run(kIterations));
  ASSERT_EQ(made.size(), 4u);
  for (const Made& m : made) {
    const bool alone = m.stage < 2;
    EXPECT_EQ(m.compute->gradient_vectors, alone ? 0 : kIterations) << "node " << m.node;
    EXPECT_EQ(m.compute->step(), kIterations) << "node " << m.node;
    ASSERT_EQ(swarm.reports(m.node).size(), static_cast<size_t>(kIterations));
    for (int i = 0; i < kIterations; ++i) {
      const StageStep& s = swarm.reports(m.node)[i].stages.at(m.stage);
      const std::string where = "node " + std::to_string(m.node) + " iteration " + std::to_string(i);
      EXPECT_EQ(s.replicas, alone ? 1 : 2) << where;
      EXPECT_TRUE(s.update.stepped) << where;
      EXPECT_GT(s.visits_here, 0) << where;
      // In process, a real round reports the codec's size of the vector.
      EXPECT_EQ(s.avg_bytes, alone ? 0 : kParams * static_cast<int64_t>(sizeof(float))) << where;
      EXPECT_EQ(s.visits_total, alone ? s.visits_here : 4) << where;
      if (alone) {
        EXPECT_EQ(s.digest_after, 0u) << where;
      }
    }
    // Note [Digest on demand] (node_trainer.h): the boundary publishes the
    // step's digest, 0 for the lone replica, without taking one.
    const uint64_t published = StepDigests(swarm.reports(m.node).back(), {m.stage}).at(m.stage);
    if (alone) {
      EXPECT_EQ(published, 0u) << "node " << m.node;
    } else {
      EXPECT_EQ(published, swarm.reports(m.node).back().stages.at(m.stage).digest_after);
      EXPECT_NE(published, 0u) << "node " << m.node;
    }
    // A real round digests at its contribution and after its step (the
    // second is the next contribution's, cached by a real compute).
    if (alone) {
      EXPECT_EQ(m.compute->digests, 0) << "node " << m.node;
    }
  }
}

// A counting compute with outer steps every H = 2 (Note [Outer steps]):
// the pseudo-gradient is 0.5 everywhere, and the outer steps it is given
// are recorded. It wraps a CountingCompute, which counts the gradient
// vectors and digests taken through it.
class OuterCountingCompute final : public OuterStepRecorder {
 public:
  OuterCountingCompute(common::Clock* clock, int stage, bool overlap)
      : OuterStepRecorder(std::make_unique<CountingCompute>(clock, stage), overlap),
        counting_(static_cast<CountingCompute*>(inner())) {}
  absl::StatusOr<AverageContribution> TakePseudoGradient() override {
    AverageContribution c;
    c.flat.assign(kParams, 0.5f);
    c.bytes = kParams * static_cast<int64_t>(sizeof(float));
    c.digest = 7;  // the anchor's, equal on every replica here
    return c;
  }
  int gradient_vectors() const { return counting_->gradient_vectors; }
  int digests() const { return counting_->digests; }

 private:
  CountingCompute* const counting_;  // the inner compute, owned by the base
};

// Note [Lone outer replica] (node_trainer.cc): with H > 1 no replica takes
// a gradient vector (its inner steps are its own), and a lone one takes no
// digest and runs no round: its syncs would fail here (failed_reduces)
// if they reached the group, yet it steps with its own pseudo-gradient
// alone, as the round of one would have answered. The two-replica stage
// still sums both pseudo-gradients through the group.
TEST(GroupOfOneTest, ALoneReplicaWithOuterStepsRunsNoRoundAndTakesNoDigest) {
  for (bool overlap : {false, true}) {
    SCOPED_TRACE(overlap ? "overlapped syncs" : "plain syncs");
    SyntheticDataSource data(2, 8, 32);
    TestSwarmOptions o;
    o.node_stages = {{0}, {1}, {2}, {2}};  // stages 0 and 1 alone, stage 2 twice
    o.num_stages = 3;
    o.driver.mbs_per_iteration = 4;
    constexpr int kIterations = 4;  // syncs after steps 2 and 4 (iterations 1, 3)
    for (int stage : {0, 1}) {
      for (uint64_t i : {1, 3}) o.failed_reduces.insert({i, stage});
    }
    std::vector<OuterCountingCompute*> made(4, nullptr);
    TestSwarm swarm(
        o,
        [&made, overlap](int node, int stage, common::Clock* clock,
                         TaskRunner*) -> std::unique_ptr<StageCompute> {
          auto c = std::make_unique<OuterCountingCompute>(clock, stage, overlap);
          made[node] = c.get();
          return c;
        },
        &data);
    ASSERT_TRUE(swarm.Run(kIterations));
    for (int node = 0; node < 4; ++node) {
      const int stage = node < 2 ? node : 2;
      const bool alone = stage < 2;
      OuterCountingCompute* c = made[node];
      ASSERT_NE(c, nullptr);
      EXPECT_EQ(c->gradient_vectors(), 0) << "node " << node;
      EXPECT_EQ(c->step(), kIterations) << "node " << node;
      if (alone) {
        EXPECT_EQ(c->digests(), 0) << "node " << node;
      } else {
        EXPECT_GT(c->digests(), 0) << "node " << node;
      }
      // Two outer steps: the lone replica's own pseudo-gradient (0.5, one
      // contributor), the pair's sum (1.0, two).
      ASSERT_EQ(c->outer_steps.size(), 2u) << "node " << node;
      for (const auto& [first, contributors] : c->outer_steps) {
        EXPECT_FLOAT_EQ(first, alone ? 0.5f : 1.0f) << "node " << node;
        EXPECT_EQ(contributors, alone ? 1 : 2) << "node " << node;
      }
      ASSERT_EQ(swarm.reports(node).size(), static_cast<size_t>(kIterations));
      for (int i = 0; i < kIterations; ++i) {
        const NodeIterationReport& r = swarm.reports(node)[i];
        const StageStep& s = r.stages.at(stage);
        const std::string where = "node " + std::to_string(node) + " iteration " + std::to_string(i);
        EXPECT_TRUE(r.status.ok()) << where << ": " << r.status;
        EXPECT_TRUE(s.update.stepped) << where;
        EXPECT_GT(s.visits_here, 0) << where;
        // The plain sync steps at iterations 1 and 3; the overlapped one
        // applies round 1 at iteration 3 and syncs in full there (the last).
        EXPECT_EQ(s.outer_step, overlap ? i == 3 : i % 2 == 1) << where;
        if (alone) {
          EXPECT_EQ(s.avg_bytes, 0) << where;
          EXPECT_EQ(s.digest_after, 0u) << where;
        }
      }
    }
  }
}

}  // namespace
}  // namespace skipswarm::node
