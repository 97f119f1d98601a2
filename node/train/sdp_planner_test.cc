#include "node/train/sdp_planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "model/sdp_assignment.h"

namespace skipswarm::node {
namespace {

// Four SDP nodes hosting the keep-0.5 subnetworks of 6 stages, named so that
// id order differs from subnetwork order.
StaticSwarmView FourNodes(std::vector<common::NodeId>* ids) {
  const model::SdpAssignment a = model::AssignSubnetworks(6, 4, 0.5).value();
  std::vector<PeerInfo> members;
  for (int w = 0; w < 4; ++w) {
    ids->push_back(common::NodeId::ForName("sdp" + std::to_string(3 - w)));
    members.push_back({ids->back(), a.subnetworks[w], 4, "", ""});
  }
  return StaticSwarmView(members);
}

TEST(SdpPlannerTest, ForwardRoutesStayOnTheNodeThroughItsSubnetwork) {
  std::vector<common::NodeId> ids;
  StaticSwarmView view = FourNodes(&ids);
  const model::SdpAssignment a = model::AssignSubnetworks(6, 4, 0.5).value();
  SdpPlanner planner(model::SdpMode::kForward);
  EXPECT_EQ(planner.name(), "sdp-forward");
  std::set<int> slots;
  for (int w = 0; w < 4; ++w) {
    auto routes = planner.Plan({.iteration = 3, .self = ids[w], .mbs = 2, .num_stages = 6}, view);
    ASSERT_TRUE(routes.ok()) << routes.status();
    ASSERT_EQ(routes->size(), 2u);
    for (const PlannedRoute& r : *routes) {
      std::vector<int> stages;
      for (const RouteHop& h : r.hops) {
        EXPECT_EQ(h.node, ids[w]);  // no frame leaves the node
        stages.push_back(h.stage);
      }
      EXPECT_EQ(stages, a.subnetworks[w]);
      // Note [SDP worker order]: worker w of the assignment, whatever its id.
      EXPECT_EQ(r.data_slot, w * 2 + r.index);
      slots.insert(r.data_slot);
    }
  }
  EXPECT_EQ(slots.size(), 8u);
}

TEST(SdpPlannerTest, BackwardRoutesVisitEveryStageOnTheNode) {
  std::vector<common::NodeId> ids;
  StaticSwarmView view = FourNodes(&ids);
  SdpPlanner planner(model::SdpMode::kBackward);
  auto routes = planner.Plan({.iteration = 0, .self = ids[2], .mbs = 1, .num_stages = 6}, view);
  ASSERT_TRUE(routes.ok()) << routes.status();
  ASSERT_EQ((*routes)[0].hops.size(), 6u);
  for (int s = 0; s < 6; ++s) {
    EXPECT_EQ((*routes)[0].hops[s].stage, s);
    EXPECT_EQ((*routes)[0].hops[s].node, ids[2]);
  }
  EXPECT_EQ((*routes)[0].data_slot, 2);
}

TEST(SdpPlannerTest, ANodeOutsideTheViewCannotPlan) {
  std::vector<common::NodeId> ids;
  StaticSwarmView view = FourNodes(&ids);
  view.MarkDead(ids[1]);
  SdpPlanner planner(model::SdpMode::kForward);
  auto dead = planner.Plan({.iteration = 0, .self = ids[1], .mbs = 1, .num_stages = 6}, view);
  EXPECT_EQ(dead.status().code(), absl::StatusCode::kUnavailable);
  // The live ones renumber: worker 2 is now the second.
  auto r = planner.Plan({.iteration = 0, .self = ids[2], .mbs = 1, .num_stages = 6}, view);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].data_slot, 1);
}

// Note [Mixed data order]: two marked SDP nodes beside a pipeline swarm of
// two data nodes and one replica of each other stage. The SDP workers take
// the slots after the pipeline's 2 x M, the pipeline planners never route
// through them, and the driver's order counts both kinds.
TEST(SdpPlannerTest, MarkedSdpNodesTakeTheSlotsAfterThePipelinesAndAreNoHops) {
  const common::NodeId d0 = common::NodeId::ForName("d0"), d1 = common::NodeId::ForName("d1");
  const common::NodeId w0 = common::NodeId::ForName("w0"), w1 = common::NodeId::ForName("w1");
  std::vector<PeerInfo> members = {{d0, {0}}, {d1, {0}}};
  for (int s = 1; s < 4; ++s) {
    members.push_back({common::NodeId::ForName("s" + std::to_string(s)), {s}});
  }
  members.push_back({w0, {0, 1, 3}});
  members.push_back({w1, {0, 2, 3}});
  members[members.size() - 2].subnetwork = true;
  members.back().subnetwork = true;
  StaticSwarmView view(members);

  const DataOrder order = DataOrderOf(view, w1);
  EXPECT_EQ(order.num_data, 4);
  EXPECT_EQ(order.pipeline_data, 2);
  EXPECT_EQ(order.rank, w0 < w1 ? 1 : 0);  // among the SDP nodes, ascending id
  EXPECT_EQ(DataOrderOf(view, d1).rank, d1 < d0 ? 0 : 1);

  SdpPlanner planner(model::SdpMode::kForward);
  std::set<int> slots;
  for (const common::NodeId& w : {w0, w1}) {
    auto routes = planner.Plan({.iteration = 0, .self = w, .mbs = 2, .num_stages = 4}, view);
    ASSERT_TRUE(routes.ok()) << routes.status();
    for (const PlannedRoute& r : *routes) {
      EXPECT_GE(r.data_slot, 4);  // after the pipeline's 2 data nodes x 2 MBs
      slots.insert(r.data_slot);
    }
  }
  EXPECT_EQ(slots, (std::set<int>{4, 5, 6, 7}));

  // The pipeline sees no SDP node: not as a data node, not as a replica.
  const PipelineHostsView hosts(view);
  EXPECT_EQ(hosts.Members().size(), 5u);
  std::vector<common::NodeId> data = {d0, d1};
  std::sort(data.begin(), data.end());
  EXPECT_EQ(hosts.Replicas(0), data);
  EXPECT_EQ(hosts.Replicas(3).size(), 1u);
  InOrderPlanner in_order;
  auto routes = in_order.Plan({.iteration = 0, .self = d0, .mbs = 2, .num_stages = 4}, view);
  ASSERT_TRUE(routes.ok()) << routes.status();
  for (const PlannedRoute& r : *routes) {
    for (const RouteHop& h : r.hops) {
      EXPECT_NE(h.node, w0);
      EXPECT_NE(h.node, w1);
    }
  }
}

}  // namespace
}  // namespace skipswarm::node
