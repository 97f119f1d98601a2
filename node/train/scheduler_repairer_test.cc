#include "node/train/scheduler_repairer.h"

#include <map>
#include <memory>

#include "common/sim_clock.h"
#include "gtest/gtest.h"
#include "node/compute/timed_stage_compute.h"
#include "node/train/data_source.h"
#include "node/train/measured_links_view.h"
#include "node/train/test_swarm.h"

namespace skipswarm::node {
namespace {

using common::NodeId;

NodeId Id(const std::string& name) { return NodeId::ForName(name); }

// o: data node; a1, a2, a3: stage 1; b: stage 2; c: stage 3.
StaticSwarmView View() {
  return StaticSwarmView({{Id("o"), {0}, 4, "", ""},
                          {Id("a1"), {1}, 4, "", ""},
                          {Id("a2"), {1}, 4, "", ""},
                          {Id("a3"), {1}, 4, "", ""},
                          {Id("b"), {2}, 4, "", ""},
                          {Id("c"), {3}, 4, "", ""}});
}

RepairRequest Request(uint64_t mb) {
  RepairRequest r;
  r.mb = mb;
  r.route = {{Id("o"), 0}, {Id("a1"), 1}, {Id("b"), 2}, {Id("c"), 3}};
  r.holder = 0;
  r.failed = {Id("a1")};
  return r;
}

TEST(SchedulerRouteRepairerTest, ReplacesTheFailedHopWithAnotherReplica) {
  StaticSwarmView view = View();
  view.MarkDead(Id("a1"));
  SchedulerRouteRepairer repairer({});
  std::map<NodeId, int> chosen;
  for (uint64_t mb = 0; mb < 30; ++mb) {
    absl::StatusOr<std::vector<RouteHop>> fixed = repairer.Repair(Request(mb), view);
    ASSERT_TRUE(fixed.ok()) << fixed.status();
    ASSERT_EQ(fixed->size(), 4u);
    EXPECT_EQ((*fixed)[0].node, Id("o"));
    EXPECT_EQ((*fixed)[1].stage, 1);
    EXPECT_NE((*fixed)[1].node, Id("a1"));
    // The rest is b, c in order: a swap of adjacent stages would cost the
    // same, but a full route stays in order (Note [Full routes stay in
    // order]).
    EXPECT_EQ((*fixed)[2].node, Id("b"));
    EXPECT_EQ((*fixed)[3].node, Id("c"));
    EXPECT_TRUE(CheckRepair(Request(mb), view, *fixed).ok());
    ++chosen[(*fixed)[1].node];
  }
  // Equal estimated costs: the tie-break spreads MBs over both survivors.
  EXPECT_GT(chosen[Id("a2")], 5);
  EXPECT_GT(chosen[Id("a3")], 5);
  // Deterministic.
  EXPECT_EQ((*repairer.Repair(Request(7), view))[1].node,
            (*repairer.Repair(Request(7), view))[1].node);
}

TEST(SchedulerRouteRepairerTest, SkipsALostStageOnlyWithinTheBudget) {
  StaticSwarmView view = View();
  RepairRequest r = Request(1);
  r.route = {{Id("o"), 0}, {Id("a1"), 1}, {Id("b"), 2}, {Id("c"), 3}};
  r.holder = 1;  // a1 ran; b (the only stage-2 node) failed
  r.failed = {Id("b")};
  view.MarkDead(Id("b"));
  SchedulerRouteRepairer repairer({});
  EXPECT_TRUE(absl::IsAborted(repairer.Repair(r, view).status()));
  r.allow_shorter = true;
  absl::StatusOr<std::vector<RouteHop>> fixed = repairer.Repair(r, view);
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  ASSERT_EQ(fixed->size(), 3u);
  EXPECT_EQ((*fixed)[1].node, Id("a1"));
  EXPECT_EQ((*fixed)[2].node, Id("c"));
  EXPECT_TRUE(CheckRepair(r, view, *fixed).ok());
}

TEST(SchedulerRouteRepairerTest, NeverReturnsToAFailedPeerThatIsNotDeadInTheView) {
  // a2 refused for memory (RESOURCE_EXHAUSTED): failed, but alive.
  StaticSwarmView view = View();
  view.MarkDead(Id("a1"));
  SchedulerRouteRepairer repairer({});
  for (uint64_t mb = 0; mb < 20; ++mb) {
    RepairRequest r = Request(mb);
    r.failed = {Id("a1"), Id("a2")};
    absl::StatusOr<std::vector<RouteHop>> fixed = repairer.Repair(r, view);
    ASSERT_TRUE(fixed.ok()) << fixed.status();
    EXPECT_EQ((*fixed)[1].node, Id("a3"));
  }
}

TEST(SchedulerRouteRepairerTest, TheOriginCannotBeReplaced) {
  StaticSwarmView view = View();
  RepairRequest r = Request(1);
  r.holder = 3;  // the last hop's output goes back to the origin
  r.failed = {Id("o")};
  SchedulerRouteRepairer repairer({});
  EXPECT_TRUE(absl::IsAborted(repairer.Repair(r, view).status()));
}

// Every link of View()'s members measured at 20 ms RTT and 100 MB/s,
// except those to and from `slow`: 200 ms and 10 MB/s, 10x slower.
void MeasureLinks(const std::string& slow, MeasuredLinksView* view) {
  const std::vector<std::string> names = {"o", "a1", "a2", "a3", "b", "c"};
  for (const std::string& from : names) {
    for (const std::string& to : names) {
      if (from == to) continue;
      const bool slow_link = from == slow || to == slow;
      view->Measure(from, to, slow_link ? 0.2 : 0.02, slow_link ? 10e6 : 100e6);
    }
  }
}

// The daemons' options (DaemonRepairerOptions): 4 MiB activations.
SchedulerRepairerOptions LinkAwareOptions() {
  SchedulerRepairerOptions o;
  o.costs.bytes_per_mb = 4 << 20;
  return o;
}

// Note [Planning from measured links]: a repair costs hops as the plan does.
TEST(SchedulerRouteRepairerTest, ARepairAvoidsAReplicaBehindATenTimesSlowerLink) {
  for (const std::string slow : {"a2", "a3"}) {
    const std::string fast = slow == "a2" ? "a3" : "a2";
    MeasuredLinksView view(View().Members());
    MeasureLinks(slow, &view);
    view.MarkDead(Id("a1"));
    SchedulerRouteRepairer repairer(LinkAwareOptions());
    for (uint64_t mb = 0; mb < 30; ++mb) {
      absl::StatusOr<std::vector<RouteHop>> fixed = repairer.Repair(Request(mb), view);
      ASSERT_TRUE(fixed.ok()) << fixed.status();
      EXPECT_EQ((*fixed)[1].node, Id(fast)) << "slow " << slow << ", mb " << mb;
      EXPECT_TRUE(CheckRepair(Request(mb), view, *fixed).ok());
    }
  }
  // link_costs false (the daemons' --node_planner_link_costs=false): the
  // uniform estimate, so the tie-break spreads MBs over both again.
  MeasuredLinksView view(View().Members());
  MeasureLinks("a2", &view);
  view.MarkDead(Id("a1"));
  SchedulerRepairerOptions uniform = LinkAwareOptions();
  uniform.costs.link_costs = false;
  SchedulerRouteRepairer repairer(uniform);
  std::map<NodeId, int> chosen;
  for (uint64_t mb = 0; mb < 30; ++mb) ++chosen[(*repairer.Repair(Request(mb), view))[1].node];
  EXPECT_GT(chosen[Id("a2")], 5);
  EXPECT_GT(chosen[Id("a3")], 5);
}

// As in plans, a throughput older than throughput_ttl counts as unknown.
TEST(SchedulerRouteRepairerTest, AnOldSlowThroughputNoLongerSteersRepairs) {
  common::SimClock clock(absl::FromUnixSeconds(1'800'000'000));
  MeasuredLinksView view(View().Members());
  MeasureLinks("", &view);  // all 20 ms, 100 MB/s, never aging
  for (const std::string peer : {"o", "b"}) {  // a2's links on the route, 10x slower at t0
    view.MeasureAt(peer, "a2", 0.02, 10e6, clock.Now());
    view.MeasureAt("a2", peer, 0.02, 10e6, clock.Now());
  }
  view.MarkDead(Id("a1"));
  SchedulerRepairerOptions o = LinkAwareOptions();
  o.costs.clock = &clock;
  SchedulerRouteRepairer repairer(o);
  auto chosen = [&] {
    std::map<NodeId, int> out;
    for (uint64_t mb = 0; mb < 30; ++mb) ++out[(*repairer.Repair(Request(mb), view))[1].node];
    return out;
  };
  clock.Advance(o.costs.throughput_ttl);  // at the TTL: still trusted
  EXPECT_EQ(chosen()[Id("a3")], 30);
  clock.Advance(absl::Seconds(1));  // past it: unknown, the median, a tie
  std::map<NodeId, int> aged = chosen();
  EXPECT_GT(aged[Id("a2")], 5);
  EXPECT_GT(aged[Id("a3")], 5);
}

TEST(SchedulerRouteRepairerTest, UnmeasuredLinksRepairExactlyAsUniformHops) {
  // Same members, no link measured: the same choice as before links were
  // measured (uniform hop_s and the tie-break), MB by MB.
  StaticSwarmView uniform_view = View();
  MeasuredLinksView unmeasured(View().Members());
  uniform_view.MarkDead(Id("a1"));
  unmeasured.MarkDead(Id("a1"));
  SchedulerRepairerOptions before;  // bytes_per_mb 0, as the daemons had it
  SchedulerRouteRepairer old_repairer(before);
  SchedulerRouteRepairer new_repairer(LinkAwareOptions());
  for (uint64_t mb = 0; mb < 30; ++mb) {
    absl::StatusOr<std::vector<RouteHop>> a = old_repairer.Repair(Request(mb), uniform_view);
    absl::StatusOr<std::vector<RouteHop>> b = new_repairer.Repair(Request(mb), unmeasured);
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_EQ(a->size(), b->size());
    for (size_t i = 0; i < a->size(); ++i) EXPECT_EQ((*a)[i].node, (*b)[i].node) << mb;
  }
}

// The real node code with the scheduler's repairer: a replica killed in the
// middle of an iteration; every iteration completes, MBs are re-routed
// within the same simulated instant the failure is seen.
TEST(SchedulerRouteRepairerTest, SwarmReroutesAroundAKilledReplica) {
  SyntheticDataSource data(2, 8, 32);
  TestSwarmOptions o;
  o.node_stages = {{0}, {0}, {1}, {1}, {2}, {2}, {3}, {3}};
  o.num_stages = 4;
  o.driver.mbs_per_iteration = 6;
  o.repairer = [] { return std::make_unique<SchedulerRouteRepairer>(SchedulerRepairerOptions{}); };
  TestSwarm swarm(o, [](int, int stage, common::Clock* clock, TaskRunner*) {
    return std::make_unique<TimedStageCompute>(
        clock, TimedStageCompute::Options{.stage = stage, .forward = absl::Milliseconds(10)});
  }, &data);
  ASSERT_TRUE(swarm.Run(2));
  const absl::Duration kill_at = swarm.clock().SteadyNow() + absl::Milliseconds(60);
  swarm.KillAt(4, kill_at);
  ASSERT_TRUE(swarm.Run(3)) << "an iteration hung";
  int completed = 0, dropped = 0;
  for (int n : {0, 1}) {
    for (const NodeIterationReport& r : swarm.reports(n)) {
      completed += r.data->completed;
      dropped += r.data->dropped;
    }
  }
  EXPECT_EQ(completed + dropped, 5 * 2 * 6);
  absl::Duration first = absl::InfiniteDuration();
  int64_t rerouted = 0;
  for (int n = 0; n < swarm.size(); ++n) {
    if (!swarm.alive(n)) continue;
    const StageServerStats s = swarm.server(n)->stats();
    rerouted += s.rerouted;
    first = std::min(first, s.first_reroute_at);
  }
  EXPECT_GT(rerouted, 0);
  // In-process the break is seen at once: the first re-route follows the
  // kill by at most one compute step (10 ms) plus a hop.
  EXPECT_GE(first, kill_at);
  EXPECT_LE(first - kill_at, absl::Milliseconds(30));
  EXPECT_EQ(swarm.compute(2, 1)->ParamsDigest(), swarm.compute(3, 1)->ParamsDigest());
}

// Note [Planning members] (route_planner.h): a record naming a stage
// outside the model (or memory_slots 0), alive or dead, is left out of the
// repairer's topology; before, its stage 99 left stages 4..98 empty and
// every repair failed for as long as gossip kept the record (25 h).
TEST(SchedulerRouteRepairerTest, AnUnusableRecordAliveOrDeadFailsNoRepair) {
  for (bool dead : {false, true}) {
    std::vector<PeerInfo> members = View().Members();
    members.push_back({Id("bad"), {99}, 4, "", ""});
    members.push_back({Id("noslots"), {2}, 0, "", ""});
    StaticSwarmView view(members);
    view.MarkDead(Id("a1"));
    if (dead) view.MarkDead(Id("bad"));
    SchedulerRepairerOptions o;
    o.num_stages = 4;
    SchedulerRouteRepairer repairer(o);
    for (uint64_t mb = 0; mb < 5; ++mb) {
      absl::StatusOr<std::vector<RouteHop>> fixed = repairer.Repair(Request(mb), view);
      ASSERT_TRUE(fixed.ok()) << "dead " << dead << ": " << fixed.status();
      EXPECT_TRUE(CheckRepair(Request(mb), view, *fixed).ok());
      for (const RouteHop& h : *fixed) {
        EXPECT_NE(h.node, Id("bad"));
        EXPECT_NE(h.node, Id("noslots"));
      }
    }
  }
}

}  // namespace
}  // namespace skipswarm::node
