#include "sim/swim_gossip.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "gtest/gtest.h"

namespace skipswarm::sim {
namespace {

// gcp12-42: 42 nodes in 12 GCP regions, one-way latencies 1-132 ms.
class SwimGossipTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto sc = ParseSimScenario(R"({"topology_file": "gcp12-42.json"})", "sim/scenarios", 1);
    ASSERT_TRUE(sc.ok()) << sc.status();
    sc_ = *std::move(sc);
    world_ = std::make_unique<NodeWorld>(&clock_, &sc_.universe.view, 0.5);
    for (int u = 0; u < world_->size(); ++u) world_->node(u).present = true;
    world_->Touch();
    gossip_ = std::make_unique<SwimGossip>(&clock_, world_.get(), &sc_, /*seed=*/3);
    gossip_->SetVerdictListener([this](int observer, int subject, proto::MemberState s) {
      if (s == proto::MEMBER_STATE_DEAD) dead_.push_back({observer, subject});
    });
    for (int u = 0; u < world_->size(); ++u) ASSERT_TRUE(gossip_->Start(u, true).ok());
  }

  int n() const { return world_->size(); }
  double Now() { return absl::ToDoubleSeconds(clock_.SteadyNow()); }
  // Steps the clock until `done` or `limit` seconds passed; the time taken.
  template <typename F>
  double RunUntil(F done, double limit) {
    const double start = Now();
    while (!done()) {
      if (Now() - start > limit) return -1;
      clock_.Advance(absl::Milliseconds(20));
    }
    return Now() - start;
  }
  bool NobodySeesAlive(int victim) {
    for (int w = 0; w < n(); ++w) {
      if (w != victim && gossip_->running(w) && gossip_->Live(w, victim)) return false;
    }
    return true;
  }
  // Detection bound: the victim is probed within two periods, and every
  // suspicion ends within Lifeguard's longest timeout (4 x min).
  double Bound() const {
    const membership::MembershipOptions& o = gossip_->options();
    return 2 * absl::ToDoubleSeconds(o.probe_interval) +
           o.suspicion_max_multiplier * absl::ToDoubleSeconds(o.suspicion_timeout) *
               std::max(1.0, std::log10(static_cast<double>(n())));
  }

  common::SimClock clock_;
  SimScenario sc_;
  std::unique_ptr<NodeWorld> world_;
  std::unique_ptr<SwimGossip> gossip_;
  std::vector<std::pair<int, int>> dead_;  // (observer, subject) DEAD verdicts
};

TEST_F(SwimGossipTest, TunedForTheScenariosWan) {
  // Largest one-way latency 132 ms (Australia - London): a 1.056 s probe
  // period (4 round trips) and a 396 ms direct probe timeout.
  EXPECT_NEAR(gossip_->max_latency_s(), 0.132, 1e-9);
  EXPECT_NEAR(absl::ToDoubleSeconds(gossip_->options().probe_interval), 1.056, 1e-9);
  EXPECT_NEAR(absl::ToDoubleSeconds(gossip_->options().probe_timeout), 0.396, 1e-9);
}

TEST_F(SwimGossipTest, AKilledNodeLeavesEveryViewWithinTheProtocolsBound) {
  clock_.Advance(absl::Seconds(20));  // converged, steady
  for (int o = 0; o < n(); ++o) {
    for (int v = 0; v < n(); ++v) ASSERT_TRUE(gossip_->Live(o, v)) << o << " " << v;
  }
  ASSERT_TRUE(dead_.empty());
  const int victim = 17;
  world_->Crash(victim);
  gossip_->Crash(victim);
  const double all = RunUntil([&] { return NobodySeesAlive(victim); }, 60);
  EXPECT_GT(all, 0);
  EXPECT_LE(all, Bound());
  std::printf("FIGURE kill_dead_in_all_views_s=%.2f bound_s=%.2f\n", all, Bound());
  ASSERT_EQ(static_cast<int>(dead_.size()), n() - 1);  // one verdict per live view
  for (const auto& [observer, subject] : dead_) EXPECT_EQ(subject, victim);
  // Quiet afterwards: no false verdicts.
  clock_.Advance(absl::Seconds(30));
  EXPECT_EQ(static_cast<int>(dead_.size()), n() - 1);
}

TEST_F(SwimGossipTest, APartitionSplitsTheViewsAndHealingJoinsThem) {
  clock_.Advance(absl::Seconds(20));
  std::vector<int> inside, outside;
  for (int u = 0; u < n(); ++u) {
    (sc_.universe.view.node(u).region == "Australia" ? inside : outside).push_back(u);
  }
  ASSERT_FALSE(inside.empty());
  world_->AddPartition({"Australia"});
  // The majority side (35 nodes, gossiping among themselves) calls the
  // cut-off side dead within the bound; the 7 cut-off nodes, whose probes
  // all fail, raise their Lifeguard health score and probe up to 9x slower
  // (membership.h: a node that is itself cut off suspects others less
  // eagerly), so their views follow much later.
  auto majority_split = [&] {
    for (int a : inside) {
      for (int b : outside) {
        if (gossip_->Live(b, a)) return false;
      }
    }
    return true;
  };
  const double majority = RunUntil(majority_split, 60);
  EXPECT_GT(majority, 0);
  EXPECT_LE(majority, Bound());
  auto minority_split = [&] {
    for (int a : inside) {
      for (int b : outside) {
        if (gossip_->Live(a, b)) return false;
      }
    }
    return true;
  };
  const double minority = RunUntil(minority_split, 900);
  EXPECT_GT(minority, 0);
  std::printf("FIGURE partition_majority_split_s=%.2f minority_split_s=%.2f\n", majority,
              majority + minority);
  for (int a : outside) {
    for (int b : outside) EXPECT_TRUE(gossip_->Live(a, b)) << a << " " << b;
  }
  world_->RemovePartition({"Australia"});
  auto joined = [&] {
    for (int a = 0; a < n(); ++a) {
      for (int b = 0; b < n(); ++b) {
        if (!gossip_->Live(a, b)) return false;
      }
    }
    return true;
  };
  EXPECT_GT(RunUntil(joined, 60), 0);
}

TEST_F(SwimGossipTest, AReplacementIsAliveAgainInEveryView) {
  clock_.Advance(absl::Seconds(20));
  const int victim = 5;
  world_->Crash(victim);
  gossip_->Crash(victim);
  ASSERT_GT(RunUntil([&] { return NobodySeesAlive(victim); }, 60), 0);
  ASSERT_TRUE(gossip_->Start(victim, /*founder=*/false).ok());
  auto everyone = [&] {
    for (int o = 0; o < n(); ++o) {
      for (int v = 0; v < n(); ++v) {
        if (!gossip_->Live(o, v)) return false;
      }
    }
    return true;
  };
  // Its fresh Membership outbids its DEAD record and learns the swarm.
  EXPECT_GT(RunUntil(everyone, 30), 0);
}

}  // namespace
}  // namespace skipswarm::sim
