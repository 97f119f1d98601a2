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

// Reports its digest honestly but serves a state that is not its own.
class ServesPoison final : public ForwardingStageCompute {
 public:
  using ForwardingStageCompute::ForwardingStageCompute;
  absl::StatusOr<std::string> ExportState() override {
    return absl::StrCat("timed/", stage(), "/", kPoisonedStep);
  }
};

// Node `wrapped`'s computes are wrapped in T; the others are plain timed ones.
template <typename T>
ComputeFactory WrapNode(int wrapped) {
  return [wrapped](int node, int stage, common::Clock* clock,
                   TaskRunner*) -> std::unique_ptr<StageCompute> {
    auto timed = std::make_unique<TimedStageCompute>(
        clock, TimedStageCompute::Options{.stage = stage, .forward = absl::Milliseconds(10)});
    if (node == wrapped) return std::make_unique<T>(std::move(timed));
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
  TestSwarm swarm(TwoByTwo(), WrapNode<LyingCompute>(kLiar), &data);
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
  TestSwarm swarm(o, WrapNode<LyingCompute>(kLiar), &data);
  ASSERT_TRUE(swarm.Run(4));
  ExpectHonestKeptItsState(swarm, 4);
  // (Its digest stays 0 whatever it imports, so from the next comparison on
  // its own check, Note [Checked re-sync], blames the trusted source: only
  // the liar is misled by its lie.)
  EXPECT_TRUE(swarm.reports(kLiar)[0].stages.at(1).resynced);
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

// Note [Checked re-sync]: a source that reports the honest digest but
// serves another state. Stage 1 has 3 replicas: a (honest), b (drifts, so it
// re-syncs) and s (serves step 1000). b imports s's state once; the next
// comparison catches s, names it, and b never takes s's state again.
TEST(ResyncTrustTest, ASourceServingAStateItDoesNotHoldIsCaughtAndNotAskedAgain) {
  constexpr int kA = 2, kB = 3, kS = 4;
  SyntheticDataSource data(2, 8, 32);
  TestSwarmOptions o;
  o.node_stages = {{0}, {0}, {1}, {1}, {1}, {2}, {2}, {3}, {3}};
  o.num_stages = 4;
  o.driver.mbs_per_iteration = 4;
  TestSwarm swarm(o, WrapNode<ServesPoison>(kS), &data);
  auto drift_b = [&] {
    StageCompute* b = swarm.compute(kB, 1);
    ASSERT_TRUE(b->ApplyUpdate(std::vector<float>(b->num_params(), 0.f), 0).ok());
  };
  // The source rotates by iteration over the holders in id order: drift b
  // where the rotation lands on s.
  const uint64_t at = swarm.id(kS) < swarm.id(kA) ? 2 : 3;
  ASSERT_TRUE(swarm.Run(at));
  drift_b();
  ASSERT_TRUE(swarm.Run(4));  // at .. at + 3
  const auto& b = swarm.reports(kB);
  ASSERT_TRUE(b[at].stages.at(1).resynced);
  EXPECT_NE(b[at].stages.at(1).digest_after, swarm.reports(kA)[at].stages.at(1).digest_after)
      << "s's state went in";
  // The next comparison names s, and b takes a's state.
  EXPECT_EQ(b[at + 1].stages.at(1).resync_source_lied, std::optional<common::NodeId>(swarm.id(kS)));
  EXPECT_TRUE(b[at + 1].stages.at(1).resynced);
  EXPECT_FALSE(b[at + 2].stages.at(1).resync_source_lied.has_value()) << "a served honestly";
  EXPECT_TRUE(b[at + 2].stages.at(1).digests_agree);
  EXPECT_FALSE(swarm.reports(kA)[at + 1].stages.at(1).resync_source_lied.has_value());
  // The rotation lands on s again at at + 4: b asks a instead.
  drift_b();
  ASSERT_TRUE(swarm.Run(1));
  EXPECT_TRUE(b[at + 4].stages.at(1).resynced);
  EXPECT_EQ(b[at + 4].stages.at(1).digest_after,
            swarm.reports(kA)[at + 4].stages.at(1).digest_after);
  EXPECT_EQ(swarm.compute(kB, 1)->step(), swarm.compute(kA, 1)->step());
}

}  // namespace
}  // namespace skipswarm::node
