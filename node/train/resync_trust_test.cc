// Note [Choosing the reference] (resync_source.h) in a whole swarm: a
// replica that lies about its digest does not take over an honest one.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "node/compute/forwarding_stage_compute.h"
#include "node/compute/timed_stage_compute.h"
#include "node/train/data_source.h"
#include "node/train/test_swarm.h"

namespace skipswarm::node {
namespace {

constexpr int kHonest = 2;  // the replicas of stage 1
constexpr int kLiar = 3;
constexpr int64_t kPoisonedStep = 1000;

// Reports digest 0 (below any honest digest: the old tie-break's winner)
// and serves a state that is not the one the group averaged.
class LyingCompute final : public ForwardingStageCompute {
 public:
  using ForwardingStageCompute::ForwardingStageCompute;
  uint64_t ParamsDigest() override { return 0; }
  absl::StatusOr<std::string> ExportState() override {
    return absl::StrCat("timed/", stage(), "/", kPoisonedStep);
  }
};

ComputeFactory WithLiar() {
  return [](int node, int stage, common::Clock* clock, TaskRunner*) -> std::unique_ptr<StageCompute> {
    auto timed = std::make_unique<TimedStageCompute>(
        clock, TimedStageCompute::Options{.stage = stage, .forward = absl::Milliseconds(10)});
    if (node == kLiar) return std::make_unique<LyingCompute>(std::move(timed));
    return timed;
  };
}

// 2 data nodes and 2 replicas of each of stages 1..3.
TestSwarmOptions TwoByTwo() {
  TestSwarmOptions o;
  o.node_stages = {{0}, {0}, {1}, {1}, {2}, {2}, {3}, {3}};
  o.num_stages = 4;
  o.driver.mbs_per_iteration = 4;
  return o;
}

void ExpectHonestKeptItsState(TestSwarm& swarm, int iterations) {
  ASSERT_EQ(swarm.reports(kHonest).size(), static_cast<size_t>(iterations));
  for (const NodeIterationReport& r : swarm.reports(kHonest)) {
    const StageStep& step = r.stages.at(1);
    EXPECT_FALSE(step.digests_agree) << "iteration " << r.iteration;
    EXPECT_FALSE(step.resynced) << "the honest replica took the liar's state at iteration "
                                << r.iteration;
  }
  EXPECT_EQ(swarm.compute(kHonest, 1)->step(), iterations);
}

// A closed swarm (nobody on probation): the two replicas tie 1:1, and the
// liar's smaller digest no longer decides it; each keeps its own state.
TEST(ResyncTrustTest, ASmallForgedDigestDoesNotWinATie) {
  SyntheticDataSource data(2, 8, 32);
  TestSwarm swarm(TwoByTwo(), WithLiar(), &data);
  ASSERT_TRUE(swarm.Run(4));
  ExpectHonestKeptItsState(swarm, 4);
}

// An open swarm: the liar is a newcomer on probation beside the trusted
// replica. The trusted one keeps its state; the newcomer is the one that
// re-syncs, from the trusted replica.
TEST(ResyncTrustTest, ANewcomerOnProbationCopiesTheTrustedReplica) {
  SyntheticDataSource data(2, 8, 32);
  TestSwarmOptions o = TwoByTwo();
  o.on_probation = {kLiar};
  TestSwarm swarm(o, WithLiar(), &data);
  ASSERT_TRUE(swarm.Run(4));
  ExpectHonestKeptItsState(swarm, 4);
  for (const NodeIterationReport& r : swarm.reports(kLiar)) {
    EXPECT_TRUE(r.stages.at(1).resynced) << "iteration " << r.iteration;
  }
}

// Note [Digest re-sync] still heals an honest drift where trust tells the
// replicas apart: a newcomer whose state drifted (one extra optimiser step)
// copies the trusted replica, and the next iteration starts equal.
TEST(ResyncTrustTest, ADriftedNewcomerResyncsFromTheTrustedReplica) {
  SyntheticDataSource data(2, 8, 32);
  TestSwarmOptions o = TwoByTwo();
  o.on_probation = {kHonest};  // the lower or higher id alike: trust decides
  TestSwarm swarm(o, [](int, int stage, common::Clock* clock, TaskRunner*) {
    return std::make_unique<TimedStageCompute>(
        clock, TimedStageCompute::Options{.stage = stage, .forward = absl::Milliseconds(10)});
  }, &data);
  ASSERT_TRUE(swarm.Run(2));
  StageCompute* trusted = swarm.compute(kLiar, 1);
  ASSERT_TRUE(trusted->ApplyUpdate(std::vector<float>(trusted->num_params(), 0.f), 0).ok());
  ASSERT_TRUE(swarm.Run(2)) << "a re-sync hung";
  EXPECT_FALSE(swarm.reports(kHonest)[2].stages.at(1).digests_agree);
  EXPECT_TRUE(swarm.reports(kHonest)[2].stages.at(1).resynced) << "the newcomer copies";
  EXPECT_FALSE(swarm.reports(kLiar)[2].stages.at(1).resynced) << "the trusted one keeps";
  EXPECT_TRUE(swarm.reports(kHonest)[3].stages.at(1).digests_agree);
  EXPECT_EQ(swarm.compute(kHonest, 1)->ParamsDigest(), trusted->ParamsDigest());
}

}  // namespace
}  // namespace skipswarm::node
