// Note [Planning members] (node/train/route_planner.h) end to end on the
// simulated network: real SWIM verdicts reach a data node's TrainingMembers
// through a membership listener, as in the gossip daemon, and its planners
// and repairer read the routing face. Gossip keeps a dead member's record
// as a tombstone for 25 h; none of it may reach a plan or a repair.
#include <algorithm>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "membership/membership.h"
#include "node/daemon/gossip/training_members.h"
#include "node/train/route_planner.h"
#include "node/train/scheduler_planner.h"
#include "node/train/scheduler_repairer.h"
#include "sim/sim_swarm.h"
#include "tests/integration/unit_membership_options.h"

namespace skipswarm {
namespace {

using membership::UnitMembershipOptions;
using node::PeerInfo;
using sim::SimNetwork;
using sim::SimSwarm;

constexpr int kStages = 3;  // data stage 0, stages 1 and 2
enum Node { kData = 0, kFirstA = 1, kFirstB = 2, kSecond = 3, kBad = 4 };

// A data node's picture of the swarm as the gossip daemon keeps it: its
// membership's view in a TrainingMembers on every change. Simulated members
// advertise one address; a daemon advertises four (Note [Daemon records]),
// so each is repeated four times.
class DataNodeView {
 public:
  explicit DataNodeView(SimSwarm* swarm) : swarm_(swarm), members_(swarm->id(kData)) {
    swarm_->node(kData).AddListener([this](const membership::MemberChange&) { Refresh(); });
    Refresh();
  }
  node::SwarmView& routing() { return *members_.routing(); }
  membership::View gossip() const { return swarm_->node(kData).GetView(); }

 private:
  void Refresh() {
    membership::View view = swarm_->node(kData).GetView();
    for (membership::MemberInfo& m : view.members) {
      if (m.addresses.size() == 1) m.addresses.resize(4, m.addresses[0]);
    }
    members_.Update(std::move(view));
  }
  SimSwarm* const swarm_;
  node::TrainingMembers members_;
};

bool Contains(const std::vector<PeerInfo>& members, const common::NodeId& id) {
  return std::any_of(members.begin(), members.end(),
                     [&](const PeerInfo& p) { return p.id == id; });
}

bool GossipSays(const membership::View& view, const common::NodeId& id,
                proto::MemberState state) {
  const membership::MemberInfo* m = view.Find(id);
  return m != nullptr && m->state == state;
}

class DeadRecordsPlanningTest : public ::testing::Test {
 protected:
  DeadRecordsPlanningTest() : swarm_(11, SimNetwork::Options(), UnitMembershipOptions()) {
    swarm_.AddNode({0});
    swarm_.AddNode({1});
    swarm_.AddNode({1});
    swarm_.AddNode({2});
    swarm_.AddNode({99});  // a stage outside the model: an unusable record
    swarm_.StartAll(kData);
    view_ = std::make_unique<DataNodeView>(&swarm_);
    node::SchedulerRepairerOptions ro;
    ro.num_stages = kStages;
    repairer_ = std::make_unique<node::SchedulerRouteRepairer>(ro);
  }

  common::NodeId id(int i) { return swarm_.id(i); }

  // One iteration's planning and one in-flight repair over the routing face:
  // both succeed, and none of their hops is on `gone`.
  void ExpectPlansAvoid(const std::vector<common::NodeId>& gone, uint64_t iteration) {
    auto planner = node::SchedulerPlanner::Create({.planner = "skippipe"});
    ASSERT_TRUE(planner.ok());
    std::vector<node::RoutePlanner*> planners = {planner->get(), &in_order_};
    for (node::RoutePlanner* p : planners) {
      auto routes = p->Plan({iteration, id(kData), 4, kStages}, view_->routing());
      ASSERT_TRUE(routes.ok()) << p->name() << ": " << routes.status();
      for (const node::PlannedRoute& r : *routes) {
        for (const node::RouteHop& h : r.hops) {
          EXPECT_EQ(std::count(gone.begin(), gone.end(), h.node), 0) << p->name();
        }
      }
    }
    // The stage-1 hop of a route fails; the rest of the route is repaired.
    const common::NodeId failed = id(kFirstA);
    node::RepairRequest r{.iteration = iteration,
                          .mb = 0,
                          .route = {{id(kData), 0}, {failed, 1}, {id(kSecond), 2}},
                          .holder = 0,
                          .failed = {failed},
                          .allow_shorter = false};
    auto fixed = repairer_->Repair(r, view_->routing());
    ASSERT_TRUE(fixed.ok()) << fixed.status();
    ASSERT_EQ(fixed->size(), 3u);
    EXPECT_EQ((*fixed)[1].node, id(kFirstB));
  }

  SimSwarm swarm_;
  std::unique_ptr<DataNodeView> view_;
  std::unique_ptr<node::SchedulerRouteRepairer> repairer_;
  node::InOrderPlanner in_order_;
  node::RefusedRecords refused_;
};

TEST_F(DeadRecordsPlanningTest, ADeadMemberLeavesThePlannersInputAtItsVerdictUntilItRestarts) {
  ASSERT_NE(swarm_.RunUntil([&] { return swarm_.Converged(); }, absl::Seconds(10)),
            absl::InfiniteDuration());
  std::vector<PeerInfo> input = node::PlanningMembers(view_->routing(), kStages, &refused_);
  EXPECT_TRUE(Contains(input, id(kFirstA)));
  EXPECT_FALSE(Contains(input, id(kBad)));  // unusable: refused
  EXPECT_EQ(refused_.count(), 1u);
  ExpectPlansAvoid({id(kBad)}, 0);

  swarm_.Kill(kFirstA);
  swarm_.Kill(kBad);
  // The bound: out of the planner's input in the very view that carries
  // the DEAD verdict (checked at every 10 ms step), and that verdict within
  // a few probe periods.
  int late = 0;
  const absl::Duration verdict = swarm_.RunUntil(
      [&] {
        const membership::View gossip = view_->gossip();
        const std::vector<PeerInfo> now =
            node::PlanningMembers(view_->routing(), kStages, &refused_);
        for (Node n : {kFirstA, kBad}) {
          late += GossipSays(gossip, id(n), proto::MEMBER_STATE_DEAD) && Contains(now, id(n));
        }
        return GossipSays(gossip, id(kFirstA), proto::MEMBER_STATE_DEAD) &&
               GossipSays(gossip, id(kBad), proto::MEMBER_STATE_DEAD);
      },
      absl::Seconds(30));
  ASSERT_NE(verdict, absl::InfiniteDuration()) << "no DEAD verdict";
  std::cout << "FIGURE dead_verdict_s=" << absl::ToDoubleSeconds(verdict) << "\n";
  EXPECT_LT(verdict, absl::Seconds(10));
  EXPECT_EQ(late, 0) << "a member gossip calls DEAD was still in the planner's input";

  // Gossip keeps both records (tombstones) and retries the dead members
  // (reconnect, within reconnect_window = 10 min): they stay out, planning
  // and repairs go on, and the dead bad record is not checked again.
  for (int second = 0; second < 11 * 60; ++second) {
    swarm_.Run(absl::Seconds(1));
    const std::vector<PeerInfo> now = node::PlanningMembers(view_->routing(), kStages, &refused_);
    ASSERT_FALSE(Contains(now, id(kFirstA))) << "back after " << second << " s";
    ASSERT_FALSE(Contains(now, id(kBad))) << "back after " << second << " s";
    if (second % 60 == 0) ExpectPlansAvoid({id(kFirstA), id(kBad)}, 1 + second);
  }
  const membership::View gossip = view_->gossip();
  EXPECT_TRUE(GossipSays(gossip, id(kFirstA), proto::MEMBER_STATE_DEAD));
  EXPECT_TRUE(GossipSays(gossip, id(kBad), proto::MEMBER_STATE_DEAD));
  EXPECT_EQ(refused_.count(), 1u);

  // A restart signs a newer record: the member is planned again; the bad
  // one's new record is refused once more, and only once.
  swarm_.Restart(kFirstA, kData);
  swarm_.Restart(kBad, kData);
  ASSERT_NE(swarm_.RunUntil(
                [&] {
                  const membership::View g = view_->gossip();
                  return GossipSays(g, id(kFirstA), proto::MEMBER_STATE_ALIVE) &&
                         GossipSays(g, id(kBad), proto::MEMBER_STATE_ALIVE);
                },
                absl::Seconds(30)),
            absl::InfiniteDuration());
  std::set<uint64_t> bad_versions;  // of the restarted bad record, as planned
  for (int i = 0; i < 20; ++i) {
    swarm_.Run(absl::Milliseconds(500));
    bad_versions.insert(view_->routing().Incarnation(id(kBad)).value_or(0));
    input = node::PlanningMembers(view_->routing(), kStages, &refused_);
    EXPECT_TRUE(Contains(input, id(kFirstA)));
    EXPECT_FALSE(Contains(input, id(kBad)));
  }
  EXPECT_EQ(refused_.count(), 1 + bad_versions.size());
  ExpectPlansAvoid({id(kBad)}, 1000);
}

}  // namespace
}  // namespace skipswarm
