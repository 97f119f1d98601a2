// The real node code (server, driver, trainer, averaging) on timed compute.
#include <memory>

#include "gtest/gtest.h"
#include "node/compute/timed_stage_compute.h"
#include "node/train/data_source.h"
#include "node/train/test_swarm.h"

namespace skipswarm::node {
namespace {

// 2 data nodes and 2 replicas of each of stages 1..3.
TestSwarmOptions TwoByTwo() {
  TestSwarmOptions o;
  o.node_stages = {{0}, {0}, {1}, {1}, {2}, {2}, {3}, {3}};
  o.num_stages = 4;
  o.driver.mbs_per_iteration = 4;
  return o;
}

TEST(TimedSwarmTest, IterationsCompleteAndReplicasAgree) {
  SyntheticDataSource data(2, 8, 32);
  TestSwarm swarm(TwoByTwo(), TimedComputes(), &data);
  ASSERT_TRUE(swarm.Run(5));
  for (int n = 0; n < swarm.size(); ++n) {
    ASSERT_EQ(swarm.reports(n).size(), 5u) << n;
    for (const NodeIterationReport& r : swarm.reports(n)) {
      EXPECT_TRUE(r.status.ok()) << r.status;
      for (const auto& [stage, step] : r.stages) {
        EXPECT_EQ(step.replicas, 2);
        EXPECT_TRUE(step.digests_agree);
        // 2 data nodes x 4 MBs, every MB visits every stage.
        EXPECT_EQ(step.visits_total, 8) << "stage " << stage;
      }
      if (r.data) {
        EXPECT_EQ(r.data->completed, 4);
        EXPECT_EQ(r.data->dropped, 0);
      }
    }
  }
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(swarm.compute(2 * s, s)->ParamsDigest(), swarm.compute(2 * s + 1, s)->ParamsDigest());
    EXPECT_EQ(swarm.compute(2 * s, s)->step(), 5);
  }
}

// Note [Restored step] (gossip_daemon_restore.cc): a stage's step is the
// swarm's iteration. A round that fails on every replica of a stage applies
// no update there, but the step still advances, so the stage's checkpoints
// stay a set with the other stages' (before: both replicas stayed one step
// behind for good, and eval refused the final set).
TEST(TimedSwarmTest, AnAveragingRoundThatFailsEverywhereStillAdvancesTheStep) {
  SyntheticDataSource data(2, 8, 32);
  TestSwarmOptions o;
  o.node_stages = {{0}, {1}, {1}};
  o.num_stages = 2;
  o.driver.mbs_per_iteration = 2;
  o.failed_reduces = {{2, 1}};
  TestSwarm swarm(o, TimedComputes(), &data);
  ASSERT_TRUE(swarm.Run(5));
  ASSERT_EQ(swarm.reports(1).size(), 5u);
  EXPECT_TRUE(absl::IsUnavailable(swarm.reports(1)[2].status)) << swarm.reports(1)[2].status;
  EXPECT_EQ(swarm.compute(0, 0)->step(), 5);
  EXPECT_EQ(swarm.compute(1, 1)->step(), 5);
  EXPECT_EQ(swarm.compute(2, 1)->step(), 5);
  EXPECT_EQ(swarm.compute(1, 1)->ParamsDigest(), swarm.compute(2, 1)->ParamsDigest());
}

// Note [Stated bounds] (inproc_group.h): a data node stuck for 30 minutes
// between its iteration 3 and the barrier is dropped from that barrier
// once the measured deadline and 2 x the bound it stated have passed; the
// other data node trains on (before: the whole swarm waited the 30
// minutes), and the stuck one, when it arrives, passes the barriers it
// missed with its updates of those iterations not applied.
TEST(TimedSwarmTest, ADataNodeStuckBeforeTheBarrierIsDroppedAndComesBack) {
  SyntheticDataSource data(2, 8, 32);
  TestSwarmOptions o = TwoByTwo();
  o.barrier_delay = {{1, absl::Minutes(30)}};
  o.barrier_delay_iterations = {3};
  TestSwarm swarm(o, TimedComputes(), &data);
  size_t done_by_10_minutes = 0;
  swarm.clock().RunAfter(absl::Minutes(10),
                         [&] { done_by_10_minutes = swarm.reports(0).size(); });
  ASSERT_TRUE(swarm.Run(8, absl::Hours(2)));
  EXPECT_EQ(done_by_10_minutes, 8u);
  for (const NodeIterationReport& r : swarm.reports(0)) EXPECT_TRUE(r.status.ok()) << r.status;
  ASSERT_EQ(swarm.reports(1).size(), 8u);
  EXPECT_TRUE(swarm.reports(1)[2].status.ok()) << swarm.reports(1)[2].status;
  EXPECT_TRUE(absl::IsUnavailable(swarm.reports(1)[3].status)) << swarm.reports(1)[3].status;
  for (int s = 1; s < 4; ++s) {
    EXPECT_EQ(swarm.compute(2 * s, s)->ParamsDigest(), swarm.compute(2 * s + 1, s)->ParamsDigest());
    EXPECT_EQ(swarm.compute(2 * s, s)->step(), 8);
  }
}

TEST(TimedSwarmTest, KilledReplicaMidIterationIsRoutedAroundAndDropped) {
  SyntheticDataSource data(2, 8, 32);
  TestSwarmOptions o = TwoByTwo();
  o.driver.mbs_per_iteration = 6;
  TestSwarm swarm(o, TimedComputes(), &data);
  ASSERT_TRUE(swarm.Run(2));
  const absl::Duration t = swarm.clock().SteadyNow();
  // Node 4 (a stage-2 replica) dies while iteration 2 is in flight.
  swarm.KillAt(4, t + absl::Milliseconds(60));
  ASSERT_TRUE(swarm.Run(3)) << "an iteration hung";
  int dropped = 0, rerouted = 0, completed = 0;
  for (int n : {0, 1}) {
    ASSERT_EQ(swarm.reports(n).size(), 5u);
    for (const NodeIterationReport& r : swarm.reports(n)) {
      dropped += r.data->dropped;
      completed += r.data->completed;
    }
  }
  for (int n = 0; n < swarm.size(); ++n) {
    if (swarm.alive(n)) rerouted += swarm.server(n)->stats().rerouted;
  }
  EXPECT_GT(dropped, 0) << "MBs whose activations were on the dead node";
  EXPECT_GT(rerouted, 0);
  EXPECT_EQ(completed + dropped, 5 * 2 * 6);
  // Iterations after the kill: the survivor carries stage 2 alone.
  const NodeIterationReport& last = swarm.reports(5).back();
  EXPECT_EQ(last.stages.at(2).replicas, 1);
  EXPECT_EQ(last.stages.at(2).visits_total, 12);
  // Surviving replicas agree.
  for (int s : {1, 3}) {
    EXPECT_EQ(swarm.compute(2 * s, s)->ParamsDigest(),
              swarm.compute(2 * s + 1, s)->ParamsDigest());
  }
  EXPECT_EQ(swarm.compute(0, 0)->ParamsDigest(), swarm.compute(1, 0)->ParamsDigest());
  // The hops to the killed stage-2 replica are sent by the stage-1 relays,
  // so the re-routes are theirs: each node's reports carry the re-routes its
  // own server made (NodeIterationReport::rerouted_here), relays included.
  int64_t by_relays = 0;
  for (int n = 0; n < swarm.size(); ++n) {
    if (!swarm.alive(n)) continue;
    int64_t reported = 0;
    for (const NodeIterationReport& r : swarm.reports(n)) {
      EXPECT_GE(r.rerouted_here, 0);
      EXPECT_LE(r.rerouted_here, r.server.rerouted);
      reported += r.rerouted_here;
    }
    // Per iteration, they add up to the server's running count.
    EXPECT_EQ(reported, swarm.reports(n).back().server.rerouted) << "node " << n;
    if (n == 2 || n == 3) by_relays += reported;  // the stage-1 relays
  }
  EXPECT_GT(by_relays, 0);
}

}  // namespace
}  // namespace skipswarm::node
