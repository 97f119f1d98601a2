#include "node/train/scheduler_planner.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <utility>
#include <set>
#include <string>
#include <vector>

#include "common/sim_clock.h"
#include "gtest/gtest.h"
#include "node/compute/timed_stage_compute.h"
#include "node/train/data_source.h"
#include "node/train/measured_links_view.h"
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


// d0, d1; stage 1 on s1a, s1b; stage 2 on s2a, s2b.
std::vector<PeerInfo> TwoReplicaLayout() {
  std::vector<PeerInfo> members;
  for (const auto& [name, stage] : std::vector<std::pair<std::string, int>>{
           {"d0", 0}, {"d1", 0}, {"s1a", 1}, {"s1b", 1}, {"s2a", 2}, {"s2b", 2}}) {
    PeerInfo p;
    p.id = common::NodeId::ForName(name);
    p.stages = {stage};
    members.push_back(p);
  }
  return members;
}

const std::vector<std::string>& TwoReplicaNames() {
  static const std::vector<std::string> names = {"d0", "d1", "s1a", "s1b", "s2a", "s2b"};
  return names;
}

// Both directions of every pair measured at `rtt_s` and `bps`.
void MeasureAll(MeasuredLinksView* view, double rtt_s, double bps) {
  for (const std::string& a : TwoReplicaNames()) {
    for (const std::string& b : TwoReplicaNames()) {
      if (a != b) view->Measure(a, b, rtt_s, bps);
    }
  }
}

// A daemon-like planner: 4 MiB activations, measured compute of 20 ms per
// layer and sample (forward 0.08 s, so hops and compute both matter).
SchedulerPlannerOptions LinkAwareOptions() {
  SchedulerPlannerOptions o;
  o.planner = "skippipe";
  o.costs.layers_per_stage = 2;
  o.costs.samples_per_mb = 2;
  o.costs.bytes_per_mb = 4 << 20;
  return o;
}

std::vector<PeerInfo> MeasuredSpeeds(std::vector<PeerInfo> members) {
  for (PeerInfo& m : members) m.sec_per_layer_sample = 0.02;
  return members;
}

std::map<common::NodeId, int> TwoReplicaVisits(SchedulerPlanner* planner, const SwarmView& view,
                                               uint64_t iteration) {
  return VisitsPerMember(planner, view, iteration, 4, 3);
}

int Visits(const std::map<common::NodeId, int>& visits, const std::string& name) {
  auto it = visits.find(common::NodeId::ForName(name));
  return it == visits.end() ? 0 : it->second;
}

TEST(SchedulerPlannerTest, LinksToAReplicaMeasuredTenTimesSlowerCarryFewerMicroBatches) {
  const std::vector<PeerInfo> members = MeasuredSpeeds(TwoReplicaLayout());
  MeasuredLinksView view(members);
  MeasureAll(&view, 0.02, 100e6);  // 20 ms, 100 MB/s
  for (const char* d : {"d0", "d1"}) {
    view.Measure(d, "s1a", 0.2, 10e6);  // 10x: 200 ms, 10 MB/s
    view.Measure("s1a", d, 0.2, 10e6);
  }
  auto planner = SchedulerPlanner::Create(LinkAwareOptions());
  ASSERT_TRUE(planner.ok());
  int slow_total = 0;
  for (uint64_t it = 0; it < 4; ++it) {
    std::map<common::NodeId, int> visits = TwoReplicaVisits(planner->get(), view, it);
    EXPECT_EQ(Visits(visits, "s1a") + Visits(visits, "s1b"), 8) << "iteration " << it;
    EXPECT_LE(Visits(visits, "s1a"), 2) << "iteration " << it;  // measured: 1, 1, 2, 2 of 8
    slow_total += Visits(visits, "s1a");
  }
  EXPECT_LE(slow_total, 6);  // of 32
  // Unmeasured, the two replicas share the load.
  StaticSwarmView uniform(members);
  std::map<common::NodeId, int> even = TwoReplicaVisits(planner->get(), uniform, 0);
  EXPECT_EQ(Visits(even, "s1a"), 4);
  EXPECT_EQ(Visits(even, "s1b"), 4);
  RecordProperty("slow_replica_mbs_of_32", slow_total);
}

TEST(SchedulerPlannerTest, RttAloneSteersMicroBatchesOffASlowLink) {
  const std::vector<PeerInfo> members = MeasuredSpeeds(TwoReplicaLayout());
  MeasuredLinksView view(members);
  MeasureAll(&view, 0.02, 0);  // throughput never measured
  for (const char* d : {"d0", "d1"}) {
    view.Measure(d, "s1a", 0.2, 0);
    view.Measure("s1a", d, 0.2, 0);
  }
  auto planner = SchedulerPlanner::Create(LinkAwareOptions());
  ASSERT_TRUE(planner.ok());
  int slow_total = 0;
  for (uint64_t it = 0; it < 4; ++it) {
    std::map<common::NodeId, int> visits = TwoReplicaVisits(planner->get(), view, it);
    // Measured: 3 of 8 in each (hops of ~0.11 s against ~0.02 s, forwards
    // of 0.08 s: some MBs still gain from the second replica).
    EXPECT_LE(Visits(visits, "s1a"), 3) << "iteration " << it;
    slow_total += Visits(visits, "s1a");
  }
  EXPECT_LE(slow_total, 12);  // of 32; 16 unmeasured
}

// Note [Planning from measured links], "Old throughputs": a link measured
// slow and then avoided carries no traffic, so nothing re-measures it; once
// its throughput is older than throughput_ttl it counts as unknown (the
// median), gets MBs again and so is re-measured.
TEST(SchedulerPlannerTest, AnAvoidedLinksOldThroughputAgesOutAndItGetsMicroBatchesAgain) {
  const std::vector<PeerInfo> members = MeasuredSpeeds(TwoReplicaLayout());
  common::SimClock clock(absl::FromUnixSeconds(1'800'000'000));
  const absl::Time t0 = clock.Now();
  // Every link 20 ms and 100 MB/s, in use (Measure: never ages); s1a's links
  // to the data nodes throughput-measured 10x slower at t0 (a capped home
  // upload: its pings stay fast and keep the RTT fresh).
  MeasuredLinksView view(members);
  MeasureAll(&view, 0.02, 100e6);
  for (const char* d : {"d0", "d1"}) {
    view.MeasureAt(d, "s1a", 0.02, 10e6, t0);
    view.MeasureAt("s1a", d, 0.02, 10e6, t0);
  }
  MeasuredLinksView all_fast(members);
  MeasureAll(&all_fast, 0.02, 100e6);
  SchedulerPlannerOptions o = LinkAwareOptions();
  ASSERT_EQ(o.costs.throughput_ttl, absl::Minutes(5));  // the documented default
  o.costs.clock = &clock;
  auto planner = SchedulerPlanner::Create(o);
  ASSERT_TRUE(planner.ok());
  auto slow_mbs = [&](const SwarmView& v) {
    int total = 0;
    for (uint64_t it = 0; it < 4; ++it) total += Visits(TwoReplicaVisits(planner->get(), v, it), "s1a");
    return total;  // of 32
  };
  // Fresh (just under the TTL): avoided.
  clock.Advance(absl::Minutes(5) - absl::Seconds(1));
  const int fresh = slow_mbs(view);
  EXPECT_LE(fresh, 6);
  // Just past the TTL: planned as if nothing were known of its throughput,
  // i.e. at the median, as fast as the others: the plan of all_fast.
  clock.Advance(absl::Seconds(2));
  EXPECT_EQ(PlanningHops(members, view, o.costs),
            PlanningHops(members, all_fast, o.costs));
  const int aged = slow_mbs(view);
  EXPECT_EQ(aged, slow_mbs(all_fast));
  EXPECT_GE(aged, 12);
  // The MBs it gets re-measure it: still slow, fresh again, avoided again
  // for another TTL (one probe per TTL, never a flip every iteration).
  for (const char* d : {"d0", "d1"}) {
    view.MeasureAt(d, "s1a", 0.02, 10e6, clock.Now());
    view.MeasureAt("s1a", d, 0.02, 10e6, clock.Now());
  }
  EXPECT_EQ(slow_mbs(view), fresh);
  // Without a clock (the simulator, static lists):
  // nothing ages.
  o.costs.clock = nullptr;
  EXPECT_NE(PlanningHops(members, view, o.costs),
            PlanningHops(members, all_fast, o.costs));
  RecordProperty("fresh_slow_mbs_of_32", fresh);
  RecordProperty("aged_slow_mbs_of_32", aged);
}

// u measures u -> v, v measures v -> u; the pair plans as the slower.
TEST(SchedulerPlannerTest, AsymmetricSamplesPlanTheSlowerDirectionBothWays) {
  const std::vector<PeerInfo> members = MeasuredSpeeds(TwoReplicaLayout());
  MeasuredLinksView view(members);
  MeasureAll(&view, 0.02, 100e6);
  for (const char* d : {"d0", "d1"}) view.Measure("s1a", d, 0.2, 10e6);  // s1a's upload
  const PlanningCosts c = LinkAwareOptions().costs;
  const std::vector<double> hops = PlanningHops(view.Members(), view, c);
  const size_t n = members.size();
  std::map<common::NodeId, size_t> index;
  for (size_t i = 0; i < n; ++i) index[view.Members()[i].id] = i;
  for (size_t u = 0; u < n; ++u) {
    for (size_t v = 0; v < n; ++v) EXPECT_EQ(hops[u * n + v], hops[v * n + u]);
  }
  const size_t d0 = index[common::NodeId::ForName("d0")];
  const size_t a = index[common::NodeId::ForName("s1a")];
  const size_t b = index[common::NodeId::ForName("s1b")];
  const double slow = QuantizeMeasurement(QuantizeMeasurement(0.2) / 2 +
                                          c.bytes_per_mb / QuantizeMeasurement(10e6) + c.hop_s);
  EXPECT_EQ(hops[d0 * n + a], slow);
  EXPECT_EQ(hops[a * n + d0], slow);
  EXPECT_EQ(hops[d0 * n + b], QuantizeMeasurement(QuantizeMeasurement(0.02) / 2 +
                                                  c.bytes_per_mb / QuantizeMeasurement(100e6) +
                                                  c.hop_s));
  auto planner = SchedulerPlanner::Create(LinkAwareOptions());
  ASSERT_TRUE(planner.ok());
  for (uint64_t it = 0; it < 4; ++it) {
    // Measured: 1, 1, 2, 2 of 8, as with both directions slow.
    EXPECT_LE(Visits(TwoReplicaVisits(planner->get(), view, it), "s1a"), 2) << "iteration " << it;
  }
}

// A pair nobody measured costs the median measured pair (the lower middle),
// each part on its own: here RTT from one pair set, throughput from another.
TEST(SchedulerPlannerTest, AnUnmeasuredLinkCostsTheMedianMeasuredOne) {
  const std::vector<PeerInfo> members = TwoReplicaLayout();
  MeasuredLinksView view(members);
  view.Measure("d0", "s1a", 0.01, 0);
  view.Measure("d0", "s1b", 0.04, 0);
  view.Measure("d1", "s1a", 0.16, 0);
  view.Measure("s1a", "s2a", -1, 50e6);
  view.Measure("s1b", "s2b", -1, 200e6);
  const SchedulerPlannerOptions o = LinkAwareOptions();
  const std::vector<PeerInfo> sorted = view.Members();
  const std::vector<double> hops = PlanningHops(sorted, view, o.costs);
  const size_t n = sorted.size();
  auto at = [&](const std::string& x, const std::string& y) {
    size_t u = 0, v = 0;
    for (size_t i = 0; i < n; ++i) {
      if (sorted[i].id == common::NodeId::ForName(x)) u = i;
      if (sorted[i].id == common::NodeId::ForName(y)) v = i;
    }
    return hops[u * n + v];
  };
  const double median_rtt = QuantizeMeasurement(0.04);  // of 0.01, 0.04, 0.16
  const double median_bps = QuantizeMeasurement(50e6);  // lower middle of 50e6, 200e6
  const auto cost = [&](double rtt, double bps) {
    return QuantizeMeasurement(rtt / 2 + o.costs.bytes_per_mb / bps + o.costs.hop_s);
  };
  EXPECT_EQ(at("d1", "s2b"), cost(median_rtt, median_bps));
  EXPECT_EQ(at("d0", "s1a"), cost(QuantizeMeasurement(0.01), median_bps));
  EXPECT_EQ(at("s1b", "s2b"), cost(median_rtt, QuantizeMeasurement(200e6)));
}

void ExpectSamePlans(const std::vector<std::vector<PlannedRoute>>& a,
                     const std::vector<std::vector<PlannedRoute>>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t d = 0; d < a.size(); ++d) {
    ASSERT_EQ(a[d].size(), b[d].size()) << what;
    for (size_t i = 0; i < a[d].size(); ++i) {
      EXPECT_EQ(a[d][i].index, b[d][i].index) << what;
      EXPECT_EQ(a[d][i].data_slot, b[d][i].data_slot) << what;
      EXPECT_EQ(a[d][i].priority, b[d][i].priority) << what;
      ASSERT_EQ(a[d][i].hops.size(), b[d][i].hops.size()) << what;
      for (size_t h = 0; h < a[d][i].hops.size(); ++h) {
        EXPECT_EQ(a[d][i].hops[h].node, b[d][i].hops[h].node) << what;
        EXPECT_EQ(a[d][i].hops[h].stage, b[d][i].hops[h].stage) << what;
      }
    }
  }
}

// With no link measured (no samples, or samples whose parts are unknown)
// the plan is the one of uniform hop estimates, as before links counted.
TEST(SchedulerPlannerTest, UnknownLinksPlanExactlyAsUniformHops) {
  std::vector<PeerInfo> members = LocalLayout();
  members[3].sec_per_layer_sample = 0.02;  // speeds still count
  StaticSwarmView plain(members);
  MeasuredLinksView none(members), unknown(members);
  for (const char* a : {"d0", "d1", "s1r0", "s2r1"}) {
    for (const char* b : {"d0", "s1r1", "s3r0"}) {
      if (std::string(a) != b) unknown.Measure(a, b, -1, 0);
    }
  }
  SchedulerPlannerOptions o = LinkAwareOptions();
  const std::vector<double> hops = PlanningHops(members, unknown, o.costs);
  for (double h : hops) EXPECT_EQ(h, o.costs.hop_s);
  for (int path_length : {0, 4}) {
    o.path_length = path_length;
    auto planner = SchedulerPlanner::Create(o);
    ASSERT_TRUE(planner.ok());
    for (uint64_t it = 0; it < 3; ++it) {
      const auto want = PlansOf(planner->get(), plain, it, 6, 6);
      ExpectSamePlans(want, PlansOf(planner->get(), none, it, 6, 6), "no samples");
      ExpectSamePlans(want, PlansOf(planner->get(), unknown, it, 6, 6), "unknown samples");
    }
  }
}

// Link measurements a few percent apart (EWMA noise) fall in the same
// buckets: every data node plans the same.
TEST(SchedulerPlannerTest, LinkMeasurementsAFewPercentApartPlanIdentically) {
  const std::vector<PeerInfo> members = MeasuredSpeeds(LocalLayout());
  MeasuredLinksView a(members), b(members);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> rtt_bucket(-20, -12);  // 11 ms .. 69 ms
  std::uniform_int_distribution<int> bps_bucket(70, 85);     // 6 MB/s .. 170 MB/s
  std::uniform_real_distribution<double> noise(0.97, 1.03);  // a bucket is x/÷ 1.118
  auto bucket = [](int k) {
    double v = 1;
    for (int i = 0; i < std::abs(k); ++i) v *= kSpeedBucket;
    return k >= 0 ? v : 1 / v;
  };
  for (const PeerInfo& x : members) {
    for (const PeerInfo& y : members) {
      if (x.id == y.id || rng() % 4 == 0) continue;  // a quarter unmeasured
      const double rtt = bucket(rtt_bucket(rng)), bps = bucket(bps_bucket(rng));
      a.MeasureIds(x.id, y.id, rtt * noise(rng), bps * noise(rng));
      b.MeasureIds(x.id, y.id, rtt * noise(rng), bps * noise(rng));
    }
  }
  EXPECT_EQ(PlanningHops(members, a, LinkAwareOptions().costs),
            PlanningHops(members, b, LinkAwareOptions().costs));
  EXPECT_NE(PlanningHops(members, a, LinkAwareOptions().costs),
            PlanningHops(members, StaticSwarmView(members), LinkAwareOptions().costs));
  for (int path_length : {0, 4}) {
    SchedulerPlannerOptions o = LinkAwareOptions();
    o.path_length = path_length;
    auto planner = SchedulerPlanner::Create(o);
    ASSERT_TRUE(planner.ok());
    for (uint64_t it = 0; it < 3; ++it) {
      ExpectSamePlans(PlansOf(planner->get(), a, it, 6, 6), PlansOf(planner->get(), b, it, 6, 6),
                      "noisy links");
    }
  }
}

}  // namespace
}  // namespace skipswarm::node

namespace skipswarm::node {
namespace {

// Note [Unusable records] (route_planner.h): a record with a stage outside
// the model or memory_slots 0 or huge is left out, as is a dead member of
// a stage whose other replica is also unusable; planning goes on.
TEST(SchedulerPlannerTest, UnusableAndDeadRecordsAreLeftOutOfPlanning) {
  std::vector<PeerInfo> members = LocalLayout();
  auto bad = [&](const std::string& name, int stage, int slots) {
    PeerInfo p;
    p.id = common::NodeId::ForName(name);
    p.stages = {stage};
    p.memory_slots = slots;
    members.push_back(p);
  };
  bad("stage99", 99, 4);
  bad("noslots", 3, 0);
  bad("hugeslots", 4, 2000000000);
  bad("deadbad", 77, 4);
  StaticSwarmView view(members);
  view.MarkDead(common::NodeId::ForName("deadbad"));
  const std::set<common::NodeId> unusable = {
      common::NodeId::ForName("stage99"), common::NodeId::ForName("noslots"),
      common::NodeId::ForName("hugeslots"), common::NodeId::ForName("deadbad")};
  for (const std::string& name : {std::string("skippipe"), std::string("noskip")}) {
    auto planner = SchedulerPlanner::Create({.planner = name});
    ASSERT_TRUE(planner.ok());
    for (uint64_t it = 0; it < 3; ++it) {
      auto routes = (*planner)->Plan({it, common::NodeId::ForName("d0"), 4, 6}, view);
      ASSERT_TRUE(routes.ok()) << name << ": " << routes.status();
      ASSERT_EQ(routes->size(), 4u);
      for (const PlannedRoute& r : *routes) {
        for (const RouteHop& h : r.hops) EXPECT_EQ(unusable.count(h.node), 0u) << name;
      }
    }
  }
  InOrderPlanner in_order;
  auto routes = in_order.Plan({0, common::NodeId::ForName("d0"), 4, 6}, view);
  ASSERT_TRUE(routes.ok()) << routes.status();
  for (const PlannedRoute& r : *routes) {
    for (const RouteHop& h : r.hops) EXPECT_EQ(unusable.count(h.node), 0u);
  }
}

// Note [Planning members]: an unusable record is refused once per record
// version (a re-signed one once more), and a dead member's record is not
// looked at again.
TEST(SchedulerPlannerTest, AnUnusableRecordIsRefusedOncePerRecordVersion) {
  std::vector<PeerInfo> members = LocalLayout();
  PeerInfo bad;
  bad.id = common::NodeId::ForName("stage99");
  bad.stages = {99};
  members.push_back(bad);
  StaticSwarmView view(members);
  RefusedRecords refused;
  auto planned = [&] {
    std::vector<PeerInfo> in = PlanningMembers(view, 6, &refused);
    return std::none_of(in.begin(), in.end(), [&](const PeerInfo& p) { return p.id == bad.id; });
  };
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(planned());
  EXPECT_EQ(refused.count(), 1u);
  view.NewRecord(bad.id);  // re-signed, still unusable
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(planned());
  EXPECT_EQ(refused.count(), 2u);
  view.MarkDead(bad.id);
  view.NewRecord(bad.id);  // a newer record, but the view says dead
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(planned());
  EXPECT_EQ(refused.count(), 2u);
}

TEST(SchedulerPlannerTest, AStageWithOnlyDeadReplicasIsUnavailable) {
  std::vector<PeerInfo> members = LocalLayout();
  StaticSwarmView view(members);
  view.MarkDead(common::NodeId::ForName("s3r0"));
  view.MarkDead(common::NodeId::ForName("s3r1"));
  auto planner = SchedulerPlanner::Create({.planner = "skippipe"});
  ASSERT_TRUE(planner.ok());
  auto routes = (*planner)->Plan({0, common::NodeId::ForName("d0"), 4, 6}, view);
  EXPECT_TRUE(absl::IsUnavailable(routes.status())) << routes.status();
  EXPECT_NE(routes.status().message().find("stage 3"), std::string::npos);
}

}  // namespace
}  // namespace skipswarm::node
