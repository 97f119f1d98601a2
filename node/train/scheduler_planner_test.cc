#include "node/train/scheduler_planner.h"

#include <map>
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

// Micro-batches each member is routed over one iteration (both data
// nodes' routes).
std::map<common::NodeId, int> VisitsPerMember(SchedulerPlanner* planner, const SwarmView& view,
                                              uint64_t iteration, int mbs, int num_stages) {
  std::map<common::NodeId, int> visits;
  for (const char* origin : {"d0", "d1"}) {
    auto routes = planner->Plan({iteration, common::NodeId::ForName(origin), mbs, num_stages},
                                view);
    EXPECT_TRUE(routes.ok()) << routes.status();
    if (!routes.ok()) continue;
    for (const PlannedRoute& r : *routes) {
      for (const RouteHop& h : r.hops) ++visits[h.node];
    }
  }
  return visits;
}

std::vector<std::vector<PlannedRoute>> PlansOf(SchedulerPlanner* planner, const SwarmView& view,
                                               uint64_t iteration, int mbs, int num_stages) {
  std::vector<std::vector<PlannedRoute>> out;
  for (const char* origin : {"d0", "d1"}) {
    auto routes = planner->Plan({iteration, common::NodeId::ForName(origin), mbs, num_stages},
                                view);
    EXPECT_TRUE(routes.ok()) << routes.status();
    out.push_back(routes.ok() ? *routes : std::vector<PlannedRoute>{});
  }
  return out;
}

// Note [Planning from measured speeds].
TEST(SchedulerPlannerTest, AReplicaMeasuredFiveTimesSlowerGetsFewerMicroBatches) {
  std::vector<PeerInfo> members = LocalLayout();
  const common::NodeId fast = common::NodeId::ForName("s2r0");
  const common::NodeId slow = common::NodeId::ForName("s2r1");
  for (PeerInfo& m : members) m.sec_per_layer_sample = m.id == slow ? 0.09 : 0.018;
  StaticSwarmView view(members);
  auto planner = SchedulerPlanner::Create({.planner = "skippipe"});
  ASSERT_TRUE(planner.ok());
  int fast_total = 0, slow_total = 0;
  for (uint64_t it = 0; it < 4; ++it) {
    std::map<common::NodeId, int> visits = VisitsPerMember(planner->get(), view, it, 8, 6);
    EXPECT_EQ(visits[fast] + visits[slow], 16) << "iteration " << it;  // every MB visits stage 2
    EXPECT_LT(2 * visits[slow], visits[fast]) << "iteration " << it;
    fast_total += visits[fast];
    slow_total += visits[slow];
  }
  // The same swarm unmeasured: the two replicas share the load.
  for (PeerInfo& m : members) m.sec_per_layer_sample = 0;
  StaticSwarmView uniform(members);
  std::map<common::NodeId, int> even = VisitsPerMember(planner->get(), uniform, 0, 8, 6);
  EXPECT_EQ(even[fast], 8);
  EXPECT_EQ(even[slow], 8);
  RecordProperty("fast_replica_mbs", fast_total);
  RecordProperty("slow_replica_mbs", slow_total);
}

TEST(SchedulerPlannerTest, MeasurementsOnePercentApartPlanIdentically) {
  // Heterogeneous measured speeds, all well inside their buckets, and the
  // same view with every measurement 1% higher.
  // (0.018 = 1.25^-18.004, 0.028 = 1.25^-16.02, ...: 1% is 0.045 of a
  // bucket's exponent width.)
  const std::vector<double> base = {0.018, 0.028, 0.018, 0.044, 0.018, 0.088,
                                    0.035, 0.018, 0.028, 0.018, 0.055, 0.018};
  std::vector<PeerInfo> a = LocalLayout(), b = LocalLayout();
  ASSERT_EQ(a.size(), base.size());
  for (size_t i = 0; i < a.size(); ++i) {
    a[i].sec_per_layer_sample = base[i];
    b[i].sec_per_layer_sample = base[i] * 1.01;
    ASSERT_EQ(QuantizeMeasuredSpeed(a[i].sec_per_layer_sample),
              QuantizeMeasuredSpeed(b[i].sec_per_layer_sample));
  }
  StaticSwarmView va(a), vb(b);
  for (int path_length : {0, 4}) {
    auto pa = SchedulerPlanner::Create({.planner = "skippipe", .path_length = path_length});
    auto pb = SchedulerPlanner::Create({.planner = "skippipe", .path_length = path_length});
    ASSERT_TRUE(pa.ok() && pb.ok());
    for (uint64_t it = 0; it < 3; ++it) {
      std::vector<std::vector<PlannedRoute>> ra = PlansOf(pa->get(), va, it, 6, 6);
      std::vector<std::vector<PlannedRoute>> rb = PlansOf(pb->get(), vb, it, 6, 6);
      ASSERT_EQ(ra.size(), rb.size());
      for (size_t d = 0; d < ra.size(); ++d) {
        ASSERT_EQ(ra[d].size(), rb[d].size());
        for (size_t i = 0; i < ra[d].size(); ++i) {
          EXPECT_EQ(ra[d][i].data_slot, rb[d][i].data_slot);
          EXPECT_EQ(ra[d][i].priority, rb[d][i].priority);
          ASSERT_EQ(ra[d][i].hops.size(), rb[d][i].hops.size());
          for (size_t h = 0; h < ra[d][i].hops.size(); ++h) {
            EXPECT_EQ(ra[d][i].hops[h].node, rb[d][i].hops[h].node);
            EXPECT_EQ(ra[d][i].hops[h].stage, rb[d][i].hops[h].stage);
          }
        }
      }
    }
  }
}

TEST(SchedulerPlannerTest, QuantizedSpeedsArePowersOfTheBucket) {
  EXPECT_EQ(QuantizeMeasuredSpeed(1.0), 1.0);
  EXPECT_EQ(QuantizeMeasuredSpeed(1.1), 1.0);    // below sqrt(1.25) = 1.118
  EXPECT_EQ(QuantizeMeasuredSpeed(1.13), 1.25);
  EXPECT_EQ(QuantizeMeasuredSpeed(0.8), 0.8);    // 1 / 1.25
  EXPECT_EQ(QuantizeMeasuredSpeed(0.018), QuantizeMeasuredSpeed(0.01818));
  // Near a bucket's edge (1.25^-17.5 = 0.02012) 1% does cross it.
  EXPECT_NE(QuantizeMeasuredSpeed(0.02), QuantizeMeasuredSpeed(0.0202));
  EXPECT_NE(QuantizeMeasuredSpeed(0.018), QuantizeMeasuredSpeed(0.09));
  for (double x : {1e-6, 3.7e-4, 0.02, 0.5, 7.0}) {
    const double q = QuantizeMeasuredSpeed(x);
    EXPECT_LE(q / x, 1.119) << x;
    EXPECT_GE(q / x, 1 / 1.119) << x;
  }
}

// A member that has not published its speed yet plans as the median
// measured member, not as the option's estimate (another scale).
TEST(SchedulerPlannerTest, AnUnmeasuredMemberCountsAsTheMedianMeasuredOne) {
  std::vector<PeerInfo> members = LocalLayout();
  std::vector<PeerInfo> all_measured = members;
  for (PeerInfo& m : members) {
    m.sec_per_layer_sample = m.id == common::NodeId::ForName("s3r1") ? 0 : 0.018;
  }
  for (PeerInfo& m : all_measured) m.sec_per_layer_sample = 0.018;
  StaticSwarmView partly(members), fully(all_measured);
  auto planner = SchedulerPlanner::Create({.planner = "skippipe"});
  ASSERT_TRUE(planner.ok());
  EXPECT_EQ(VisitsPerMember(planner->get(), partly, 0, 8, 6),
            VisitsPerMember(planner->get(), fully, 0, 8, 6));
}

}  // namespace
}  // namespace skipswarm::node
