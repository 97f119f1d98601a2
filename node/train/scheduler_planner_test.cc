#include "node/train/scheduler_planner.h"

#include <memory>

#include "gtest/gtest.h"
#include "node/compute/timed_stage_compute.h"
#include "node/train/data_source.h"
#include "node/train/test_swarm.h"

namespace skipswarm::node {
namespace {

TEST(SchedulerPlannerTest, DataNodesAgreeOnOnePlanAndInjectTheirShare) {
  std::vector<PeerInfo> members;
  std::vector<std::vector<int>> stages = {{0}, {0}, {1}, {1}, {2}, {2}, {3}, {3}};
  for (size_t i = 0; i < stages.size(); ++i) {
    members.push_back({common::NodeId::ForName("p" + std::to_string(i)), stages[i], 4, "", ""});
  }
  StaticSwarmView view(members);
  SchedulerPlannerOptions o{.planner = "skippipe", .path_length = 3};
  auto a = SchedulerPlanner::Create(o);
  auto b = SchedulerPlanner::Create(o);
  ASSERT_TRUE(a.ok() && b.ok());
  auto ra = (*a)->Plan({5, members[0].id, 3, 4}, view);
  auto rb = (*b)->Plan({5, members[1].id, 3, 4}, view);
  ASSERT_TRUE(ra.ok()) << ra.status();
  ASSERT_TRUE(rb.ok()) << rb.status();
  EXPECT_EQ(ra->size() + rb->size(), 6u);
  std::set<int> slots;
  for (const auto* routes : {&*ra, &*rb}) {
    for (const PlannedRoute& r : *routes) {
      EXPECT_EQ(r.hops.size(), 3u);  // P = 3 of S = 4: one stage skipped
      slots.insert(r.data_slot);
    }
  }
  EXPECT_EQ(slots.size(), 6u);
  EXPECT_FALSE(SchedulerPlanner::Create({.planner = "nope"}).ok());
}

TEST(SchedulerPlannerTest, SwarmTrainsOnSkipRoutes) {
  SyntheticDataSource data(2, 8, 32);
  TestSwarmOptions o;
  o.node_stages = {{0}, {0}, {1}, {1}, {2}, {2}, {3}, {3}, {4}, {4}, {5}, {5}};
  o.num_stages = 6;
  o.driver.mbs_per_iteration = 6;
  o.planner = [] {
    return std::unique_ptr<RoutePlanner>(
        *SchedulerPlanner::Create({.planner = "skippipe", .path_length = 4}));
  };
  TestSwarm swarm(o, [](int, int stage, common::Clock* clock, TaskRunner*) {
    return std::make_unique<TimedStageCompute>(clock, TimedStageCompute::Options{.stage = stage});
  }, &data);
  ASSERT_TRUE(swarm.Run(3));
  const NodeIterationReport& last = swarm.reports(2).back();
  int64_t visits = 0;
  for (int n = 2; n < swarm.size(); n += 2) {
    visits += swarm.reports(n).back().stages.begin()->second.visits_total;
  }
  EXPECT_EQ(visits, 2 * 6 * 3);  // D x M x (P - 1)
  EXPECT_TRUE(last.stages.at(1).digests_agree);
  for (int n : {0, 1}) {
    for (const auto& r : swarm.reports(n)) EXPECT_EQ(r.data->dropped, 0);
  }
}

}  // namespace
}  // namespace skipswarm::node
