// Note [Paused members] (node/daemon/gossip/training_members.h): a paused
// volunteer is routed around from the next plan on without timeouts or
// drops, keeps averaging (its state stays its replica's) and is routed
// again once it resumes. Everything runs on the simulated clock.
#include <memory>

#include "gtest/gtest.h"
#include "node/compute/timed_stage_compute.h"
#include "node/train/data_source.h"
#include "node/train/test_swarm.h"

namespace skipswarm::node {
namespace {

// 2 data nodes and 2 replicas of each of stages 1..3; node 3 is stage 1's
// second replica, the one that pauses.
TestSwarmOptions TwoByTwo() {
  TestSwarmOptions o;
  o.node_stages = {{0}, {0}, {1}, {1}, {2}, {2}, {3}, {3}};
  o.num_stages = 4;
  o.driver.mbs_per_iteration = 6;
  return o;
}
constexpr int kPaused = 3;
constexpr int kReplica = 2;

int64_t Dropped(const TestSwarm& swarm) {
  int64_t n = 0;
  for (int d : {0, 1}) {
    for (const NodeIterationReport& r : swarm.reports(d)) n += r.data->dropped;
  }
  return n;
}

int64_t Rerouted(TestSwarm& swarm, const std::string& reason) {
  int64_t n = 0;
  for (int i = 0; i < swarm.size(); ++i) {
    const auto& by = swarm.server(i)->stats().rerouted_by_reason;
    auto it = by.find(reason);
    if (it != by.end()) n += it->second;
  }
  return n;
}

TEST(VolunteerPauseTest, PausedReplicaIsRoutedAroundKeepsItsStateAndIsRoutedAgainOnResume) {
  SyntheticDataSource data(2, 8, 32);
  TestSwarm swarm(TwoByTwo(), TimedComputes(), &data);
  ASSERT_TRUE(swarm.Run(2));
  ASSERT_GT(swarm.reports(kPaused)[1].stages.at(1).visits_here, 0);
  // Mid-iteration 2: micro-batches are already on their way through it.
  const absl::Duration paused_at = swarm.clock().SteadyNow() + absl::Milliseconds(25);
  swarm.clock().RunAt(paused_at, [&] { swarm.SetPaused(kPaused, true); });
  ASSERT_TRUE(swarm.Run(4));
  for (uint64_t i = 2; i < 6; ++i) {
    const StageStep& step = swarm.reports(kPaused)[i].stages.at(1);
    if (i > 2) {
      EXPECT_EQ(step.visits_here, 0) << "iteration " << i;
    }
    EXPECT_EQ(step.visits_total, 12) << "iteration " << i;  // every MB still visits stage 1
    EXPECT_EQ(step.replicas, 2) << "iteration " << i;       // it still averages
    EXPECT_TRUE(step.digests_agree) << "iteration " << i;
  }
  EXPECT_EQ(Dropped(swarm), 0);
  EXPECT_EQ(Rerouted(swarm, "deadline"), 0);  // nothing waited for it
  EXPECT_EQ(swarm.compute(kPaused, 1)->ParamsDigest(), swarm.compute(kReplica, 1)->ParamsDigest());
  EXPECT_EQ(swarm.compute(kPaused, 1)->step(), 6);

  swarm.SetPaused(kPaused, false);
  ASSERT_TRUE(swarm.Run(2));
  EXPECT_GT(swarm.reports(kPaused)[6].stages.at(1).visits_here, 0);  // routed at once
  EXPECT_EQ(Dropped(swarm), 0);
  EXPECT_EQ(swarm.compute(kPaused, 1)->ParamsDigest(), swarm.compute(kReplica, 1)->ParamsDigest());
}

// A data node that planned before the pause reached its view: the paused
// server refuses the new iteration's forwards and the sender re-routes
// them at once to the other replica (reason "paused"), no deadline, no
// drop.
TEST(VolunteerPauseTest, ALateRecordCostsARerouteNotATimeout) {
  SyntheticDataSource data(2, 8, 32);
  TestSwarm swarm(TwoByTwo(), TimedComputes(), &data);
  ASSERT_TRUE(swarm.Run(1));
  swarm.SetServerPaused(kPaused, true);
  for (int v = 1; v < swarm.size(); ++v) swarm.SetPausedInView(v, kPaused, true);
  // Data node 0 still plans through it; the iteration its server is in
  // (1: paused between iterations) is still served, later ones are not.
  ASSERT_TRUE(swarm.Run(3));
  EXPECT_GT(swarm.server(0)->stats().rerouted_by_reason.at("paused"), 0);
  EXPECT_GT(swarm.server(kPaused)->stats().frames_paused, 0);
  for (uint64_t i = 2; i < 4; ++i) {
    EXPECT_EQ(swarm.reports(kPaused)[i].stages.at(1).visits_here, 0) << "iteration " << i;
    EXPECT_EQ(swarm.reports(kPaused)[i].stages.at(1).visits_total, 12) << "iteration " << i;
  }
  EXPECT_EQ(Dropped(swarm), 0);
  EXPECT_EQ(Rerouted(swarm, "deadline"), 0);
}

}  // namespace
}  // namespace skipswarm::node
