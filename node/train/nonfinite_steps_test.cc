// Note [Non-finite steps] (node_trainer.h): a stage whose averaged gradient
// is not finite (every replica's gradient is: a shared divergence) skips
// the step on every replica alike, and the run stops with DATA_LOSS after
// kMaxNonFiniteSteps such steps in a row. One replica's NaN alone is left
// out of the average (Note [Robust averaging], robust_sum.h).
#include <cmath>
#include <limits>
#include <memory>
#include <set>

#include "gtest/gtest.h"
#include "node/compute/forwarding_stage_compute.h"
#include "node/compute/timed_stage_compute.h"
#include "node/train/data_source.h"
#include "node/train/test_swarm.h"

namespace skipswarm::node {
namespace {

// TimedStageCompute whose gradients are NaN in the listed steps.
class PoisonedCompute final : public ForwardingStageCompute {
 public:
  PoisonedCompute(common::Clock* clock, int stage, std::set<int64_t> poisoned)
      : ForwardingStageCompute(std::make_unique<TimedStageCompute>(
            clock, TimedStageCompute::Options{.stage = stage})),
        poisoned_(poisoned) {}
  absl::StatusOr<GradientSum> TakeGradients() override {
    absl::StatusOr<GradientSum> g = inner()->TakeGradients();
    if (g.ok() && poisoned_.count(inner()->step()) > 0 && !g->flat.empty()) {
      g->flat[0] = std::numeric_limits<float>::quiet_NaN();
    }
    return g;
  }
  absl::StatusOr<UpdateStats> ApplyUpdate(const std::vector<float>& summed,
                                          int64_t total_visits) override {
    for (float x : summed) {
      if (!std::isfinite(x)) ++nonfinite_applied;
    }
    return inner()->ApplyUpdate(summed, total_visits);
  }
  // Through the two methods above (ForwardingStageCompute's rule).
  absl::StatusOr<UpdateStats> ApplyLocalUpdate() override { return StageState::ApplyLocalUpdate(); }

  int nonfinite_applied = 0;

 private:
  const std::set<int64_t> poisoned_;
};

TestSwarmOptions OneStageTwoReplicas() {
  TestSwarmOptions o;
  o.node_stages = {{0}, {1}, {1}};
  o.num_stages = 2;
  o.driver.mbs_per_iteration = 2;
  return o;
}

// The replicas of stage 1 on `nodes` (1 and 2 host it) send NaN gradients
// in `poisoned` steps.
ComputeFactory Poisoned(std::set<int64_t> poisoned, std::vector<PoisonedCompute*>* made,
                        std::set<int> nodes = {1, 2}) {
  return [poisoned, made, nodes](int node, int stage, common::Clock* clock,
                                 TaskRunner*) -> std::unique_ptr<StageCompute> {
    auto c = std::make_unique<PoisonedCompute>(
        clock, stage, nodes.count(node) > 0 ? poisoned : std::set<int64_t>{});
    made->push_back(c.get());
    return c;
  };
}

TEST(NonFiniteStepsTest, ANonFiniteAverageIsSkippedOnEveryReplicaAlike) {
  SyntheticDataSource data(2, 8, 32);
  std::vector<PoisonedCompute*> made;
  TestSwarm swarm(OneStageTwoReplicas(), Poisoned({1}, &made), &data);
  ASSERT_TRUE(swarm.Run(4));
  for (PoisonedCompute* c : made) EXPECT_EQ(c->nonfinite_applied, 0);
  for (int n : {1, 2}) {
    ASSERT_EQ(swarm.reports(n).size(), 4u);
    EXPECT_TRUE(swarm.reports(n)[1].stages.at(1).skipped_nonfinite) << n;
    EXPECT_FALSE(swarm.reports(n)[2].stages.at(1).skipped_nonfinite) << n;
    EXPECT_TRUE(swarm.reports(n)[3].stages.at(1).digests_agree) << n;
  }
  EXPECT_EQ(swarm.compute(1, 1)->ParamsDigest(), swarm.compute(2, 1)->ParamsDigest());
  EXPECT_EQ(swarm.compute(1, 1)->step(), 4);
}

TEST(NonFiniteStepsTest, ConsecutiveNonFiniteStepsStopTheRunWithDataLoss) {
  SyntheticDataSource data(2, 8, 32);
  std::vector<PoisonedCompute*> made;
  TestSwarm swarm(OneStageTwoReplicas(), Poisoned({2, 3, 4, 5, 6, 7, 8, 9}, &made), &data);
  // The replicas stop after kMaxNonFiniteSteps; the data node, left
  // without a replica of stage 1, pauses (Note [Paused training]).
  (void)swarm.Run(10, absl::Minutes(10));
  for (PoisonedCompute* c : made) EXPECT_EQ(c->nonfinite_applied, 0);
  for (int n : {1, 2}) {
    EXPECT_EQ(swarm.reports(n).size(), 2u + NodeTrainer::kMaxNonFiniteSteps) << n;
    EXPECT_TRUE(absl::IsDataLoss(swarm.done_status(n))) << swarm.done_status(n);
    EXPECT_NE(swarm.done_status(n).message().find("stage 1"), std::string::npos);
  }
}

// One replica's NaN used to skip the step on every replica, for as long as
// it kept sending them (and stop the run after kMaxNonFiniteSteps): now its
// part is left out, the others step, and the sender is named.
TEST(NonFiniteStepsTest, OneReplicasNaNIsLeftOutAndTheStageStillSteps) {
  SyntheticDataSource data(2, 8, 32);
  std::vector<PoisonedCompute*> made;
  TestSwarm swarm(OneStageTwoReplicas(), Poisoned({1, 2, 3, 4, 5, 6, 7, 8}, &made, {2}), &data);
  ASSERT_TRUE(swarm.Run(8));
  for (PoisonedCompute* c : made) EXPECT_EQ(c->nonfinite_applied, 0);
  const common::NodeId liar = swarm.id(2);
  for (int n : {1, 2}) {
    ASSERT_EQ(swarm.reports(n).size(), 8u);
    int named = 0;
    for (size_t i = 1; i < 8; ++i) {
      const StageStep& s = swarm.reports(n)[i].stages.at(1);
      EXPECT_FALSE(s.skipped_nonfinite) << n << " " << i;
      EXPECT_TRUE(s.digests_agree) << n << " " << i;
      for (const PartVerdict& v : s.refused_parts) {
        EXPECT_EQ(v.from, liar);
        EXPECT_EQ(v.kind, PartVerdict::Kind::kNonFinite);
        ++named;
      }
    }
    EXPECT_EQ(named, 7) << n;
  }
  EXPECT_EQ(swarm.compute(1, 1)->ParamsDigest(), swarm.compute(2, 1)->ParamsDigest());
}

}  // namespace
}  // namespace skipswarm::node
