#include "node/train/scheduler_planner.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "scheduler/evaluator.h"
#include "scheduler/topology.h"

namespace skipswarm::node {

// Note [Full routes stay in order]
// The skippipe search allows swaps (Workload::max_swaps, 2 adjacent swaps by
// default) at any path length, and at P = S it uses them: on the default
// `skipswarm local` layout (2 data nodes x 4 MBs, stages 1-5 x 2 replicas,
// uniform costs; `plan_tool plan --show_routes`, seeds 1-3) every route is
// in order while all 12 nodes live, but with one replica of stage 2 dead, as
// after a --kill, 6 of the 8 routes swap (0,1,3,2,4,5, 0,2,1,3,4,5, ...)
// to keep MBs off the lone replica at the same moment; with two stages down
// to one replica and 8 MBs per data node, 4-7 of 16.
// A swapped full route is a different network: stage 3's blocks read stage
// 1's output and stage 2's read stage 3's. Evaluation, checkpoints and
// inference run the stages in order (model/evaluate.h, `skipswarm eval`),
// and train-ref's routes are in order, so each swapped micro-batch trains
// the weights on a composition the evaluated model never computes: noise in
// the gradient, not a sample of the target. With uniform hop estimates a
// swap cannot shorten a route either (the same nodes cost the same in any
// order, measured compute speeds included); it only moves queueing around.
// With measured links (Note [Planning from measured links]) a swap can
// shorten one, but choosing the replica of each stage avoids a slow link
// too, without changing the network the MB trains. So at full length the
// daemons' planner keeps routes in order (max_swaps 0: the scheduler's
// `noskip`, the same search) and still chooses, per micro-batch, the replicas (load, memory slots, collisions, dead members
// left out), the priorities and the injection times. Swaps stay what
// docs/DESIGN.md §1 makes them, a tool of skip routes (path_length < S): there
// the model trains on varying sub-networks anyway, the route rides in the
// record, and train-ref replays swapped routes as given
// (LocalPipeline::TrainMicroBatch takes any valid order).

// Note [Planning from measured speeds]
// Every member publishes its measured compute speed in its signed record
// (Note [Measured speeds] in node/daemon/reporting/speed_reports.h); TrainingMembers
// hands it over as PeerInfo::sec_per_layer_sample, and each node's t_v in
// the TopologyView is that value, so the search sends fewer micro-batches
// through a slow replica (its forwards and backwards cost more, and the
// evaluator queues them there).
// Determinism: every data node plans the whole iteration from its own view
// with the same seed and injects only the routes whose origin it is. The
// views are gossip's, so two data nodes may hold different estimates of
// the same member (a record re-signed in between) and then compute
// different plans. That costs balance, never correctness: each MB is still
// injected by exactly one origin on a valid route, with a data slot of its
// own as long as the data nodes agree on the member set and M (what they
// already had to agree on before speeds were measured); a node routed more
// MBs than its peers expected only queues them. To make such differences
// rare, a speed is rounded to the nearest power of 1.25 before planning
// (QuantizeMeasuredSpeed): an estimate moving by 1% changes its bucket
// with probability ~4.5%, and a member republishes only after a 20% move
// anyway. The bucket value is made by repeated multiplication (exact IEEE
// steps), not pow(), so a bucket index gives the same double everywhere
// (only the index, from log(), could differ between C libraries, and only
// for a value at a bucket's very edge).
// A member that has not published yet (a joiner before its first tasks)
// counts as the median measured speed of the view (the lower middle one,
// itself a bucket value): the option's estimate is on another scale than
// measured seconds and would make it look far faster or slower than its
// peers. With no measurement in the view (static --swarm lists, the
// simulator's nodes backend) every node gets the option's estimate and the
// plan is exactly the one planned before speeds were measured.

// Note [Planning from measured links]
// Every node measures its links (membership/link_stats.h): RTT from gossip
// ping/ack, throughput from the pipeline hops it sends (LinkTimingTransport:
// payload bytes over send -> ack). Samples are gossiped first-hand
// (from = the measuring node) and TrainingMembers answers SwarmView::Link
// with them. The planner turns them into the hop costs of docs/DESIGN.md §5:
//   d(u,v) = rtt/2 + bytes_per_mb / bytes_per_second + hop_s, quantized
// (scheduler::HopSeconds with latency rtt/2 and hop_s as the fixed per-hop
// overhead; bytes_per_mb is the activation of one micro-batch on the wire,
// planner_factory.h). The measured throughput already contains a latency
// (send -> ack), so rtt/2 is counted twice on a throughput-measured link:
// a small bias towards low-latency links, which is the right direction.
// Direction: TopologyView needs d(u,v) = d(v,u) (a route's backward
// retraces its forward), while u measures u->v and v measures v->u. The
// pair takes the slower of what is known, per part: the larger RTT and the
// smaller throughput of the two samples. Why the slower: a hop crosses the
// link both ways (activation forward, gradient backward), so the worse
// direction is paid on every route through it, and an asymmetric home
// connection (slow upload) should count as slow.
// Unknown parts: a pair with no RTT takes the median (lower middle) RTT of
// the measured pairs, one with no throughput the median throughput, not an
// option's estimate, for the reason speeds do (Note [Planning from measured
// speeds]): estimates are on another scale than measurements and would
// make every unmeasured link look far better or worse than the measured
// ones; as typical links, unmeasured ones still get traffic and so get
// measured. With no RTT measured anywhere the RTT term is 0; with no
// throughput anywhere (or bytes_per_mb 0) the transfer term is 0. With no
// measurement at all every hop costs hop_s, the plan of unmeasured links.
// Old throughputs: throughput is only measured where frames flow, so a link
// the plans avoid would keep its last (slow) throughput for ever, even after
// it recovers (its RTT alone keeps being refreshed by pings). So every
// throughput carries the time of its latest sample, stamped by the
// measuring node's wall clock (LinkSample.throughput_measured_at_unix_ms,
// apart from measured_at, which pings refresh every round), and one older
// than PlanningCosts::throughput_ttl (default 5 min) counts as unknown here: the
// link is planned at the median throughput, gets MBs like a typical link
// and is re-measured; still slow, it is avoided for another TTL. A data node
// judges the age with its own wall clock (PlanningCosts::clock, the clock seam;
// without one nothing ages). Why 5 min: a link in use is re-measured every
// iteration it carries a hop (seconds), so only an avoided link ever gets
// near the TTL; each expiry costs one probe (MBs over a link that may still
// be slow, for the iterations until the new sample is gossiped: seconds,
// push-pull every 5 s at worst), i.e. a few seconds in 300, while a home link whose congestion ended (an
// upload finished) is back in the plans within minutes. Throughput samples
// more than a minute apart also restart the measuring node's average
// (MembershipOptions::throughput_restart_after), so a re-admitted link is
// judged on its present, not blended with the sample that got it avoided.
// Agreement: ageing cannot flip plans back and forth, because a sample's
// age only grows until a new sample replaces it: each sample turns stale
// once. All data nodes hold the same first-hand sample with the same stamp
// (gossip keeps the newest per link), so they disagree on its staleness only
// in a window around its expiry as wide as the difference of their wall
// clocks plus the difference of the moments they plan the same iteration
// (NTP-synchronised clocks: milliseconds; unsynchronised: the skew). A
// measuring node's own skew shifts the expiry equally for everyone. Inside
// that window their plans differ, which costs collision avoidance only, as
// below; a sample stamped in a data node's future counts as fresh.
// Agreement: every part is quantized (QuantizeMeasurement, powers of 1.25)
// before it is combined, so medians are bucket values, and so is the sum:
// the hop matrix is the same double for views whose samples differ by a
// few percent (the EWMAs of link_stats.h move on every sample, so this is
// the common case). Quantizing the parts alone is not enough: a small part
// jitters by whole buckets (loopback RTTs measured 0.2-6 ms under load in
// `skipswarm local`), and any change of the matrix can change the search's
// plan; next to hop_s (10 ms) such a part rarely moves the sum's bucket.
// Views can still disagree: a sample near a bucket's edge, a sample one
// data node has and another has not yet received, which also moves the
// medians. Then the data nodes plan different iterations. What that costs,
// checked against Plan() below: (1) each data node injects only the routes
// whose origin it is (key.first == input.self), so every MB is injected by
// exactly one node; (2) each route comes from a plan over the planner's own
// view, so it is valid (distinct stages by the route rules, alive replicas
// of this node's view) whatever the others planned; (3) a route's data
// slot is its rank in (origin id, mb) order over the plan's routes, and
// the search makes exactly M routes per alive data node, MB i*M+j for the
// i-th (ascending index = ascending id; SetRoute in
// scheduler/skippipe_planner.cc), so the slot is i*M + j: it depends on
// the origin, j and the set of alive data nodes, never on hop costs. Data
// order stays disjoint (Note [Data order]) as long as the data nodes agree
// on the data node set and M, which they needed before links were
// measured. So a
// disagreement on links costs collision avoidance only: the other data
// nodes' routes were planned against a different picture, MBs may meet at
// a replica the plan thought free and queue there (memory slots bound the
// queue, StageServer admission), and priorities of different plans
// interleave arbitrarily. It never loses or duplicates an MB.

double QuantizeMeasurement(double value) {
  const long k = std::clamp(std::lround(std::log(value) / std::log(kSpeedBucket)), -400L, 400L);
  double v = 1;
  for (long i = 0; i < std::labs(k); ++i) v *= kSpeedBucket;
  return k >= 0 ? v : 1 / v;
}

namespace {

bool Measured(const PeerInfo& m) {
  return m.sec_per_layer_sample > 0 && std::isfinite(m.sec_per_layer_sample);
}

bool Finite(double x) { return x > 0 && std::isfinite(x); }

// The lower middle of `known` (a bucket value when they all are).
double Median(std::vector<double> known) {
  std::sort(known.begin(), known.end());
  return known[(known.size() - 1) / 2];
}

}  // namespace

std::vector<double> PlanningSpeeds(const std::vector<PeerInfo>& members, double estimate) {
  std::vector<double> known;
  for (const PeerInfo& m : members) {
    if (Measured(m)) known.push_back(QuantizeMeasuredSpeed(m.sec_per_layer_sample));
  }
  double fallback = estimate;
  if (!known.empty()) {
    std::sort(known.begin(), known.end());
    fallback = known[(known.size() - 1) / 2];
  }
  std::vector<double> out;
  for (const PeerInfo& m : members) {
    out.push_back(Measured(m) ? QuantizeMeasuredSpeed(m.sec_per_layer_sample) : fallback);
  }
  return out;
}

std::vector<double> PlanningSpeeds(const std::vector<PeerInfo>& members,
                                   const PlanningCosts& costs) {
  if (!costs.sec_per_layer_sample_of) return PlanningSpeeds(members, costs.sec_per_layer_sample);
  std::vector<double> out;
  for (const PeerInfo& m : members) out.push_back(costs.sec_per_layer_sample_of(m.id));
  return out;
}

std::vector<double> PlanningHops(const std::vector<PeerInfo>& members, const SwarmView& view,
                                 const PlanningCosts& costs) {
  const absl::Time now = costs.clock != nullptr ? costs.clock->Now() : absl::InfinitePast();
  const size_t n = members.size();
  std::vector<double> hops(n * n, costs.hop_s);
  if (costs.hop_s_of) {
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < n; ++j) {
        hops[i * n + j] = i == j ? 0 : costs.hop_s_of(members[i].id, members[j].id);
      }
    }
    return hops;
  }
  if (!costs.link_costs) return hops;
  // Per pair u < v, the slower of the two directions' quantized parts;
  // 0 = unknown (Note [Planning from measured links]).
  std::vector<double> rtt(n * n, 0), bps(n * n, 0);
  std::vector<double> known_rtt, known_bps;
  for (size_t u = 0; u < n; ++u) {
    for (size_t v = u + 1; v < n; ++v) {
      double& r = rtt[u * n + v];
      double& b = bps[u * n + v];
      for (const auto& [from, to] : {std::pair(u, v), std::pair(v, u)}) {
        std::optional<LinkEstimate> e = view.Link(members[from].id, members[to].id);
        if (!e) continue;
        const double rtt_s = absl::ToDoubleSeconds(e->rtt);  // inf when unknown
        if (Finite(rtt_s)) r = std::max(r, QuantizeMeasurement(rtt_s));
        // An old throughput is unknown: it may describe a link that has
        // recovered while the plans avoided it.
        const bool fresh = now - e->throughput_measured_at <= costs.throughput_ttl;
        if (Finite(e->bytes_per_second) && fresh) {
          const double q = QuantizeMeasurement(e->bytes_per_second);
          b = b == 0 ? q : std::min(b, q);
        }
      }
      if (r > 0) known_rtt.push_back(r);
      if (b > 0) known_bps.push_back(b);
    }
  }
  if (known_rtt.empty() && known_bps.empty()) return hops;  // as before links were measured
  const double median_rtt = known_rtt.empty() ? 0 : Median(known_rtt);
  const double median_bps = known_bps.empty() ? 0 : Median(known_bps);
  for (size_t u = 0; u < n; ++u) {
    for (size_t v = u + 1; v < n; ++v) {
      scheduler::LinkSpec link;
      link.latency_s = (rtt[u * n + v] > 0 ? rtt[u * n + v] : median_rtt) / 2;
      link.bandwidth_bytes_per_s = bps[u * n + v] > 0 ? bps[u * n + v] : median_bps;
      // The sum is quantized again: parts far below hop_s (loopback or
      // LAN RTTs, jittery by whole buckets) then cannot move it.
      const double d = QuantizeMeasurement(
          link.bandwidth_bytes_per_s > 0
              ? scheduler::HopSeconds(link, costs.bytes_per_mb, costs.hop_s)
              : link.latency_s + costs.hop_s);  // no throughput known anywhere
      hops[u * n + v] = d;
      hops[v * n + u] = d;
    }
  }
  return hops;
}

absl::StatusOr<std::unique_ptr<SchedulerPlanner>> SchedulerPlanner::Create(
    const SchedulerPlannerOptions& options) {
  absl::StatusOr<std::unique_ptr<scheduler::Planner>> p =
      scheduler::CreatePlanner(options.planner);
  if (!p.ok()) return p.status();
  return std::unique_ptr<SchedulerPlanner>(new SchedulerPlanner(options, *std::move(p)));
}

absl::StatusOr<std::vector<PlannedRoute>> SchedulerPlanner::Plan(const PlanInput& input,
                                                                 const SwarmView& swarm) {
  const PipelineHostsView view(swarm);  // never through a subnetwork member
  const bool full_routes =
      options_.path_length <= 0 || options_.path_length >= input.num_stages;
  // Note [Planning members] (route_planner.h): dead members and unusable
  // records are out of the planner's input; a dead record kept by gossip
  // (dead_retention) must not fail later iterations.
  std::vector<PeerInfo> members = PlanningMembers(view, input.num_stages, &refused_);
  std::vector<bool> stage_covered(std::max(0, input.num_stages), false);
  for (const PeerInfo& m : members) {
    for (int s : m.stages) stage_covered[s] = true;
  }
  for (int s = 0; s < input.num_stages; ++s) {
    if (!stage_covered[s]) {
      return absl::UnavailableError(absl::StrCat("no live replica of stage ", s));
    }
  }
  for (const PeerInfo& m : members) {
    if (m.stages.size() != 1 && full_routes && options_.planner == "skippipe") {
      return in_order_.Plan(input, view);  // outside the scheduler's model
    }
    if (m.stages.size() != 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          "planner '", options_.planner, "' needs one stage per node; ", m.id.ShortString(),
          " hosts ", m.stages.size()));
    }
  }
  bool fresh = false;
  absl::StatusOr<const SharedPlan*> shared = PlanOver(input, std::move(members), view, &fresh);
  if (!shared.ok()) return shared.status();
  const scheduler::TopologyView& topo = (*shared)->view;

  // Global slots in plan order (origin by id, then mb), so data order is
  // disjoint across data nodes (Note [Data order]).
  std::map<std::pair<common::NodeId, int>, const scheduler::Route*> ordered;
  for (const scheduler::Route& r : (*shared)->plan.routes) {
    ordered[{topo.node(r.origin).id, r.mb}] = &r;
  }
  // Note [MB deadline] (data_node_driver.h): each route's predicted round
  // trip, from the evaluator's simulation of the whole plan on the view's
  // costs (queueing behind the other data nodes' MBs included): its finish
  // less its release. None on a deadlocked or failed evaluation.
  const scheduler::Plan& plan = (*shared)->plan;
  std::vector<double> finish_s;
  const double total_s = scheduler::EvaluateTime(topo, plan, &finish_s);
  const bool predicted = std::isfinite(total_s) && finish_s.size() == plan.routes.size();
  std::vector<PlannedRoute> out;
  int slot = 0;
  for (const auto& [key, r] : ordered) {
    if (key.first == input.self) {
      PlannedRoute pr;
      pr.index = static_cast<int>(out.size());
      pr.data_slot = slot;
      pr.priority = r->priority;
      const size_t ri = static_cast<size_t>(r - plan.routes.data());
      if (predicted && std::isfinite(finish_s[ri]) && finish_s[ri] >= r->release_s) {
        pr.predicted_round_trip = absl::Seconds(finish_s[ri] - r->release_s);
      }
      for (size_t i = 0; i + 1 < r->nodes.size(); ++i) {
        pr.hops.push_back({topo.node(r->nodes[i]).id, topo.stage(r->nodes[i])});
      }
      out.push_back(std::move(pr));
    }
    ++slot;
  }
  if (options_.cache != nullptr) {
    options_.cache->Handed(input, static_cast<int>(out.size()), **shared, fresh);
  }
  return out;
}

absl::StatusOr<const SharedPlan*> SchedulerPlanner::PlanOver(const PlanInput& input,
                                                             std::vector<PeerInfo> members,
                                                             const SwarmView& view, bool* fresh) {
  *fresh = false;
  PlanCache* cache = options_.cache;
  std::string key;
  if (cache != nullptr) {
    // Everything the search reads but the costs, which costs_key() stands for.
    key = absl::StrCat(cache->costs_key(), "|", options_.seed, "|",
                       options_.seed_per_iteration ? input.iteration : 0, "|", input.mbs, "|",
                       input.num_stages, "|");
    for (const PeerInfo& m : members) {
      absl::StrAppend(&key, m.id.Bytes(), ":", m.stages[0], ":", m.memory_slots, ",");
    }
    if (const SharedPlan* hit = cache->Find(key)) return hit;
  }
  absl::StatusOr<SharedPlan> plan = Search(input, std::move(members), view);
  if (!plan.ok()) return plan.status();
  *fresh = true;
  if (cache != nullptr) return cache->Insert(key, *std::move(plan));
  own_ = std::make_unique<SharedPlan>(*std::move(plan));
  return own_.get();
}

// Note [Relaxed balance]
// The search keeps every stage's visits within +-balance_tolerance of the
// mean (scheduler::BalanceRange). A swarm depleted by failures (one replica
// left of a stage that must carry a share of the visits) may have no plan
// within that rule; rather than fail every iteration until members return,
// the planner searches again with the tolerance doubled (at least 0.1),
// up to 8, and trains on the first plan found. A plan within the rule is
// always preferred: the looser searches run only after the first failed.
// The simulator reports such plans as `balance_relaxed`.
absl::StatusOr<SharedPlan> SchedulerPlanner::Search(const PlanInput& input,
                                                    std::vector<PeerInfo> members,
                                                    const SwarmView& view) {
  const bool full_routes =
      options_.path_length <= 0 || options_.path_length >= input.num_stages;
  const std::vector<double> speeds = PlanningSpeeds(members, options_.costs);
  std::vector<scheduler::NodeSpec> nodes;
  for (size_t i = 0; i < members.size(); ++i) {
    const PeerInfo& m = members[i];
    scheduler::NodeSpec n;
    n.name = m.id.ShortString();
    n.id = m.id;
    n.stage = m.stages[0];
    n.sec_per_layer_sample = speeds[i];
    n.memory_slots = m.memory_slots;
    nodes.push_back(n);
  }
  scheduler::ModelShape shape;
  shape.num_stages = input.num_stages;
  shape.layers_per_stage = options_.costs.layers_per_stage;
  shape.samples_per_mb = options_.costs.samples_per_mb;
  shape.bytes_per_mb = options_.costs.bytes_per_mb;
  PlanCache* cache = options_.cache;
  SharedPlan out;
  // Note [Planning from measured links].
  absl::StatusOr<scheduler::TopologyView> topo = scheduler::TopologyView::Create(
      shape, std::move(nodes), PlanningHops(members, view, options_.costs));
  if (!topo.ok()) return topo.status();
  out.members = std::move(members);
  out.view = *std::move(topo);
  if (cache != nullptr) out.costs_key = cache->costs_key();
  scheduler::PlanRequest request;
  request.view = &out.view;
  request.workload.mb_per_data_node = input.mbs;
  request.workload.path_length = full_routes ? input.num_stages : options_.path_length;
  // Note [Full routes stay in order].
  request.workload.max_swaps = full_routes ? 0 : options_.max_swaps;
  request.workload.max_jump = options_.max_jump;
  request.workload.balance_tolerance = options_.balance_tolerance;
  out.tolerance = options_.balance_tolerance;
  if (options_.incremental && cache != nullptr && cache->latest() != nullptr &&
      cache->latest()->costs_key == out.costs_key) {
    absl::StatusOr<scheduler::Plan> kept =
        ReplanForLeavers(*cache->latest(), out.members, out.view, request.workload);
    if (kept.ok()) {
      cache->CountPlan();
      out.plan = *std::move(kept);
      out.incremental = true;
      return out;
    }
  }
  // Same seed on every data node for the same iteration: the same plan.
  request.seed = options_.seed_per_iteration ? options_.seed * 1000003 + input.iteration
                                             : options_.seed;
  request.clock = nullptr;  // no time budget: deterministic
  request.max_evaluations = options_.max_evaluations;
  request.stall_evaluations = options_.stall_evaluations;
  request.candidates_per_stage = options_.candidates_per_stage;
  absl::StatusOr<scheduler::Plan> replay = absl::NotFoundError("no routes");
  if (planner_->name() == "replay") {
    if (!options_.replay) return absl::FailedPreconditionError("planner 'replay' has no routes");
    replay = options_.replay(out.members);
    if (!replay.ok()) return replay.status();
    request.replay = &*replay;
  }
  if (cache != nullptr) cache->CountPlan();
  common::Clock* wall = cache != nullptr ? cache->wall_clock() : nullptr;
  const absl::Duration t0 = wall != nullptr ? wall->SteadyNow() : absl::ZeroDuration();
  absl::StatusOr<scheduler::Plan> plan = planner_->MakePlan(request);
  // Note [Relaxed balance].
  for (double tol = std::max(0.1, 2 * request.workload.balance_tolerance); !plan.ok() && tol <= 8;
       tol *= 2) {
    request.workload.balance_tolerance = tol;
    plan = planner_->MakePlan(request);
    out.balance_relaxed = plan.ok();
    out.tolerance = tol;
  }
  if (wall != nullptr) cache->AddPlanningTime(wall->SteadyNow() - t0);
  if (!plan.ok()) return plan.status();
  out.plan = *std::move(plan);
  return out;
}

}  // namespace skipswarm::node
