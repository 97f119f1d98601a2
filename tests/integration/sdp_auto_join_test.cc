// --sdp=auto (Note [A subnetwork joins] in gossip_daemon_join.cc): a
// GossipDaemon joining a training swarm without stages chooses its role
// with ChooseJoinRole. Three founders (stages 0, 1, 2) of the tiny model
// train in one process over loopback gRPC; a joiner with a memory slot per
// stage is made an SDP worker on a subnetwork (stage 0, the last stage):
// it enters both stages at one boundary, trains its own data with no
// micro-batch dropped, and its digests equal its stages' other hosts'
// after its first step. A joiner with fewer slots than stages cannot hold
// a subnetwork and takes one pipeline stage. Waits on notifications, no
// sleeps.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "node/daemon/gossip/gossip_daemon.h"
#include "tests/integration/running_daemon.h"
#include "tests/integration/tiny_gossip_options.h"

namespace skipswarm::node {
namespace {

class SdpAutoJoinTest : public ::testing::Test {
 protected:
  void SetUp() override {
    corpus_ = ::testing::TempDir() + "/sdp_auto_corpus.txt";
    WriteTinyCorpus(corpus_, "the swarm trains line ", " of a tiny corpus");
  }

  GossipDaemonOptions Options(const std::string& name, std::vector<int> stages) {
    GossipDaemonOptions o = TinyGossipOptions(name, std::move(stages), corpus_, "sdp-auto-test");
    o.base.iterations = 300;  // the joiner enters while the founders train
    // Fixed speeds, the founders' slow: their iteration is long beside the
    // averaging over loopback links, whatever those measured, so
    // ChooseJoinRole's choice does not depend on the machine's load.
    o.fixed_compute_speed = 0.1;
    return o;
  }

  // Founders d0 {0}, a {1}, b {2}, training (d0 past iteration 5).
  void StartSwarm() {
    GossipDaemonOptions d0 = Options("d0", {0});
    d0.expect_members = 3;
    founders_.push_back(LaunchDaemon(d0, /*reach=*/-1, /*train=*/6));
    ASSERT_NE(founders_[0], nullptr);
    bootstrap_ = founders_[0]->daemon->gossip_address();
    for (const auto& [name, stage] : std::vector<std::pair<std::string, int>>{{"a", 1}, {"b", 2}}) {
      GossipDaemonOptions o = Options(name, {stage});
      o.expect_members = 3;
      o.gossip.join = {bootstrap_};
      founders_.push_back(LaunchDaemon(o));
      ASSERT_NE(founders_.back(), nullptr);
    }
    ASSERT_TRUE(founders_[0]->WaitUnlessFinished(founders_[0]->trained)) << founders_[0]->result;
  }

  // The joiner's first reports, once it has `n`; it then drains.
  std::vector<NodeIterationReport> Join(int memory_slots, size_t n) {
    GossipDaemonOptions j = Options("j", {});
    j.gossip.join = {bootstrap_};
    j.choose_role = true;
    j.fixed_compute_speed = 1e-3;
    j.base.memory_slots = memory_slots;
    std::unique_ptr<RunningDaemon> rj = LaunchDaemon(j, /*reach=*/-1, /*train=*/n);
    if (rj == nullptr) return {};
    EXPECT_TRUE(rj->WaitUnlessFinished(rj->trained)) << rj->result;
    EXPECT_TRUE(rj->daemon->RequestDrain(/*force=*/false).ok());
    rj->Join();
    EXPECT_TRUE(rj->result.ok()) << rj->result;
    absl::MutexLock lock(&rj->mu);
    return rj->reports;
  }

  // Stops the founders; their reports.
  std::vector<std::vector<NodeIterationReport>> StopSwarm() {
    std::vector<std::vector<NodeIterationReport>> out;
    for (auto& f : founders_) {
      f->signals.stop = true;
      f->Join();
      EXPECT_TRUE(f->result.ok()) << f->result;
      absl::MutexLock lock(&f->mu);
      out.push_back(f->reports);
    }
    return out;
  }

  std::string corpus_, bootstrap_;
  std::vector<std::unique_ptr<RunningDaemon>> founders_;
};

TEST_F(SdpAutoJoinTest, AJoinerThatCanHoldASubnetworkTrainsOneAsAnSdpWorker) {
  StartSwarm();
  const std::vector<NodeIterationReport> mine = Join(/*memory_slots=*/3, 4);
  ASSERT_GE(mine.size(), 4u);  // and the drained iteration
  // keep 0.5 of 3 stages: P = 2, stage 0 and the last.
  for (const NodeIterationReport& r : mine) {
    ASSERT_EQ(r.stages.size(), 2u) << "iteration " << r.iteration << ": not a subnetwork";
    EXPECT_EQ(r.stages.count(0), 1u);
    EXPECT_EQ(r.stages.count(2), 1u);
    ASSERT_TRUE(r.data.has_value()) << "an SDP worker trains its own data";
    EXPECT_TRUE(r.data->status.ok()) << r.data->status;
    EXPECT_EQ(r.data->dropped, 0);
  }
  int completed = 0;
  for (const NodeIterationReport& r : mine) completed += r.data->completed;
  EXPECT_GT(completed, 0);
  const uint64_t first = mine[0].iteration;
  const std::vector<std::vector<NodeIterationReport>> swarm = StopSwarm();
  // d0 hosts stage 0, b stage 2: each stage's hosts step to one digest.
  for (const auto& [who, stage] : std::vector<std::pair<int, int>>{{0, 0}, {2, 2}}) {
    bool found = false;
    for (const NodeIterationReport& r : swarm[who]) {
      if (r.iteration != first) continue;
      found = true;
      EXPECT_EQ(r.stages.at(stage).digest_after, mine[0].stages.at(stage).digest_after)
          << "stage " << stage << " after the joiner's first step";
      EXPECT_EQ(r.stages.at(stage).replicas, 2) << "stage " << stage;
    }
    EXPECT_TRUE(found) << "stage " << stage;
  }
}

TEST_F(SdpAutoJoinTest, AJoinerWithFewerSlotsThanStagesTakesAPipelineStage) {
  StartSwarm();
  const std::vector<NodeIterationReport> mine = Join(/*memory_slots=*/2, 3);
  ASSERT_GE(mine.size(), 3u);
  for (const NodeIterationReport& r : mine) {
    EXPECT_EQ(r.stages.size(), 1u) << "iteration " << r.iteration;
  }
  StopSwarm();
}

}  // namespace
}  // namespace skipswarm::node
