#include "node/train/scheduler_planner.h"

#include <memory>
#include <set>
#include <string>
#include <vector>

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

// The default local layout: 2 data nodes, stages 1..5 with 2 replicas each.
std::vector<PeerInfo> LocalLayout() {
  std::vector<PeerInfo> members;
  auto add = [&](const std::string& name, int stage) {
    PeerInfo p;
    p.id = common::NodeId::ForName(name);
    p.stages = {stage};
    members.push_back(p);
  };
  add("d0", 0);
  add("d1", 0);
  for (int s = 1; s < 6; ++s) {
    for (int r = 0; r < 2; ++r) add("s" + std::to_string(s) + "r" + std::to_string(r), s);
  }
  return members;
}

// Note [Full routes stay in order]: with a replica of stage 2 dead the
// scheduler's search swaps stages when it may; full routes must not.
TEST(SchedulerPlannerTest, FullRoutesVisitEveryStageInOrderAroundADeadReplica) {
  const std::vector<PeerInfo> members = LocalLayout();
  StaticSwarmView view(members);
  const common::NodeId dead = common::NodeId::ForName("s2r1");
  view.MarkDead(dead);
  for (int path_length : {0, 6}) {
    auto planner = SchedulerPlanner::Create({.planner = "skippipe", .path_length = path_length});
    ASSERT_TRUE(planner.ok());
    for (uint64_t it = 0; it < 5; ++it) {
      std::set<int> slots;
      for (const char* origin : {"d0", "d1"}) {
        auto routes = (*planner)->Plan({it, common::NodeId::ForName(origin), 4, 6}, view);
        ASSERT_TRUE(routes.ok()) << routes.status();
        ASSERT_EQ(routes->size(), 4u);
        for (const PlannedRoute& r : *routes) {
          slots.insert(r.data_slot);
          ASSERT_EQ(r.hops.size(), 6u);
          for (size_t h = 0; h < r.hops.size(); ++h) {
            EXPECT_EQ(r.hops[h].stage, static_cast<int>(h)) << "iteration " << it;
            EXPECT_NE(r.hops[h].node, dead);
          }
        }
      }
      EXPECT_EQ(slots.size(), 8u);
    }
  }
}

TEST(SchedulerPlannerTest, FullRoutesOverMultiStageMembersArePlannedInOrder) {
  std::vector<PeerInfo> members = LocalLayout();
  members.resize(2);
  PeerInfo both;
  both.id = common::NodeId::ForName("s12");
  both.stages = {1, 2};
  members.push_back(both);
  StaticSwarmView view(members);
  auto full = SchedulerPlanner::Create({.planner = "skippipe"});
  ASSERT_TRUE(full.ok());
  auto routes = (*full)->Plan({0, members[0].id, 2, 3}, view);
  ASSERT_TRUE(routes.ok()) << routes.status();
  InOrderPlanner in_order;
  auto expected = in_order.Plan({0, members[0].id, 2, 3}, view);
  ASSERT_TRUE(expected.ok());
  ASSERT_EQ(routes->size(), expected->size());
  for (size_t i = 0; i < routes->size(); ++i) {
    const std::vector<RouteHop>& got = (*routes)[i].hops;
    const std::vector<RouteHop>& want = (*expected)[i].hops;
    ASSERT_EQ(got.size(), want.size());
    for (size_t h = 0; h < got.size(); ++h) {
      EXPECT_EQ(got[h].node, want[h].node);
      EXPECT_EQ(got[h].stage, want[h].stage);
    }
  }
  // Skip routes need the scheduler's model: one stage per node.
  auto skip = SchedulerPlanner::Create({.planner = "skippipe", .path_length = 2});
  ASSERT_TRUE(skip.ok());
  EXPECT_EQ((*skip)->Plan({0, members[0].id, 2, 3}, view).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace skipswarm::node
