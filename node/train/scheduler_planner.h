// SchedulerPlanner: a RoutePlanner backed by scheduler/'s planners
// ("pipeline", "noskip", "random", "skippipe", chosen by name; docs/DESIGN.md §5).
// Every data node builds the same TopologyView from its SwarmView and plans
// the whole iteration with the same seed (iteration-derived), so all data
// nodes compute the same plan and each injects the routes whose origin it
// is; no coordinator is needed.
//
//   SchedulerPlannerOptions o{.planner = "skippipe", .path_length = 4};
//   o.costs.bytes_per_mb = 4 << 20;  o.costs.clock = clock;
//   SS_ASSIGN_OR_RETURN(auto planner, SchedulerPlanner::Create(o));
//
// "skippipe" is the daemons' default planner. With path_length 0 (or S) it
// plans full routes that visit every stage in order, choosing per micro-batch
// the replicas, priorities and injection order (the scheduler's `noskip`
// search); only skip routes (path_length < S) may swap stages. Why: Note
// [Full routes stay in order] in scheduler_planner.cc.
//
// Compute speeds are the members' measured ones (PeerInfo::
// sec_per_layer_sample, from gossip records; Note [Planning from measured
// speeds] in scheduler_planner.cc), quantized so that every data node plans
// the same from slightly different views; unmeasured members count as the
// median measured speed, and a view with no measurement (static lists, the
// simulator) plans with the uniform estimate in the costs, as before.
// Hop costs come from the view's measured links (SwarmView::Link: gossip
// RTT and pipeline throughput): d(u,v) = rtt/2 + bytes_per_mb / (bytes/s)
// + hop_s, both directions combined into the slower, quantized like speeds
// and with unmeasured links at the median measured link (Note [Planning
// from measured links] in scheduler_planner.cc), so routes avoid slow
// links. A throughput older than `throughput_ttl` (by the costs' clock)
// counts as unknown, so a link avoided since it was measured slow gets MBs
// and is re-measured again. A view with no link measurement plans every hop
// at the uniform `hop_s` estimate, exactly as before links were measured.
// Each node must host exactly one stage (the scheduler's model); for full
// routes a view where some member hosts several stages (static --swarm
// lists like 1+2) is planned by InOrderPlanner instead, as
// SchedulerRouteRepairer falls back to ReplicaRouteRepairer.
// Costs given from outside (PlanningCosts::sec_per_layer_sample_of,
// hop_s_of) replace the view's measurements: the simulator's nodes run this
// planner with the scenario's figures (sim/node_planning.h), sharing plans
// through a PlanCache (plan_cache.h). A swarm too depleted for the balance
// rule is planned with a looser one (Note [Relaxed balance] in
// scheduler_planner.cc).
//
// Thread rule: one caller at a time.
#ifndef SKIPSWARM_NODE_TRAIN_SCHEDULER_PLANNER_H_
#define SKIPSWARM_NODE_TRAIN_SCHEDULER_PLANNER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/clock.h"
#include "node/train/plan_cache.h"
#include "node/train/route_planner.h"
#include "scheduler/planner.h"

namespace skipswarm::node {

// The cost inputs of a plan (SchedulerPlanner) and of a repair
// (SchedulerRouteRepairer), one struct so that both cost compute and hops
// by the same numbers (PlanningSpeeds, PlanningHops; Note [Planning from
// measured links] in scheduler_planner.cc). The daemons fill it once
// (DataNodeSchedulerOptions in node/daemon/stack/planner_factory.h) and give the
// repairer the same copy.
struct PlanningCosts {
  // The model shape of the TopologyView (scheduler::ModelShape).
  int layers_per_stage = 1;
  int samples_per_mb = 1;
  double sec_per_layer_sample = 1e-3;  // estimate while no member is measured
  // Per-hop estimate: the whole cost of a hop while no link is measured,
  // the fixed overhead added to measured rtt/2 + transfer time otherwise.
  double hop_s = 0.01;
  // Activation (or gradient) bytes of one micro-batch hop; the transfer
  // term of a measured link. The daemons fill it (planner_factory.h); 0
  // leaves the transfer time out (RTT alone ranks links).
  double bytes_per_mb = 0;
  // false: every hop at hop_s whatever the view measured (the planner
  // before links were measured; for comparisons).
  bool link_costs = true;
  // A throughput sample older than this (by `clock`'s wall time against the
  // measuring node's LinkEstimate::throughput_measured_at) counts as
  // unknown, so an avoided link is planned at the median again, carries
  // MBs and is re-measured (Note [Planning from measured links]: why 5 min,
  // and what two data nodes' clocks can disagree on). The clock is
  // borrowed and must outlive the planner or repairer given these costs;
  // nullptr: samples never age (the simulator, static lists).
  absl::Duration throughput_ttl = absl::Minutes(5);
  common::Clock* clock = nullptr;
  // Costs from outside; each one set replaces what the view measured, in
  // plans and repairs alike (the simulator's nodes backend, sim/node_swarm.h,
  // sets both to the scenario's: a simulated node plans and repairs as a
  // daemon whose measurements are the scenario's figures). hop_s_of may
  // return scheduler::kNoLink (infinity) for an unusable link.
  std::function<double(const common::NodeId&)> sec_per_layer_sample_of;
  std::function<double(const common::NodeId& from, const common::NodeId& to)> hop_s_of;
};

struct SchedulerPlannerOptions {
  std::string planner = "skippipe";
  int path_length = 0;        // P (stages visited incl. 0); 0 = all stages
  // Route rules (scheduler::Workload) of skip routes; full routes never
  // swap (Note [Full routes stay in order]).
  int max_swaps = 2;
  int max_jump = 4;
  PlanningCosts costs{};  // {}: designated initializers may leave it out
  uint64_t seed = 1;
  // true (the daemons): iteration i is planned with seed * 1000003 + i, so
  // skip routes vary between iterations. false: every iteration with
  // `seed`, so an unchanged view gives the same plan and a PlanCache can
  // reuse it across iterations (the simulator).
  bool seed_per_iteration = true;
  // Stage visits per stage within +-balance_tolerance of the mean
  // (scheduler::Workload); a plan that cannot meet it is searched again
  // with a looser one (Note [Relaxed balance] in scheduler_planner.cc).
  double balance_tolerance = 0.10;
  // Search effort (scheduler::PlanRequest's limits; no wall-clock budget).
  int max_evaluations = 20000;
  int stall_evaluations = 1500;
  int candidates_per_stage = 12;
  // Plans shared with other data nodes' planners (plan_cache.h); borrowed,
  // must outlive the planner. nullptr: every Plan() searches.
  PlanCache* cache = nullptr;
  // With a cache: a view that only lost members since the cache's latest
  // plan (same costs_key) keeps that plan, repaired by ReplanForLeavers.
  bool incremental = false;
  // For planner "replay": the routes to replay over `members` (view
  // order, indices into it), or an error when they cannot be replayed
  // (e.g. a member of the routes is gone).
  std::function<absl::StatusOr<scheduler::Plan>(const std::vector<PeerInfo>& members)> replay{};
};

// A measurement rounded to the nearest power of 1.25 (kSpeedBucket), so two
// views whose measurements differ by a few percent give the same value
// (Notes [Planning from measured speeds] and [Planning from measured
// links]): compute speeds (seconds), RTTs (seconds) and throughputs (bytes
// per second). REQUIRES: value > 0 and finite.
inline constexpr double kSpeedBucket = 1.25;
double QuantizeMeasurement(double value);
inline double QuantizeMeasuredSpeed(double seconds) { return QuantizeMeasurement(seconds); }

// The t_v of every member, in order (Note [Planning from measured speeds]):
// its quantized measured speed, the median measured one when unmeasured,
// `estimate` for all when none is measured.
std::vector<double> PlanningSpeeds(const std::vector<PeerInfo>& members, double estimate);
// The t_v the planner and the repairer use: costs.sec_per_layer_sample_of
// when set, else PlanningSpeeds(members, costs.sec_per_layer_sample).
std::vector<double> PlanningSpeeds(const std::vector<PeerInfo>& members,
                                   const PlanningCosts& costs);

// The symmetric hop matrix (row-major, members.size()^2) the planner gives
// the scheduler for `members` under `view`'s links (Note [Planning from
// measured links]); uniform costs.hop_s when no link is measured. A
// throughput measured more than costs.throughput_ttl before costs.clock's
// Now() counts as unknown (no clock: none ages). With costs.hop_s_of set,
// its answers instead (0 on the diagonal). The one hop cost of plans and
// repairs: SchedulerRouteRepairer uses it too.
std::vector<double> PlanningHops(const std::vector<PeerInfo>& members, const SwarmView& view,
                                 const PlanningCosts& costs);

class SchedulerPlanner final : public RoutePlanner {
 public:
  static absl::StatusOr<std::unique_ptr<SchedulerPlanner>> Create(
      const SchedulerPlannerOptions& options);

  std::string name() const override { return options_.planner; }
  absl::StatusOr<std::vector<PlannedRoute>> Plan(const PlanInput& input,
                                                 const SwarmView& view) override;

 private:
  SchedulerPlanner(const SchedulerPlannerOptions& options,
                   std::unique_ptr<scheduler::Planner> planner)
      : options_(options), planner_(std::move(planner)) {}
  // The plan over `members` (usable, alive, one stage each): searched, or
  // found in / repaired from the cache. `fresh`: computed by this call.
  absl::StatusOr<const SharedPlan*> PlanOver(const PlanInput& input,
                                             std::vector<PeerInfo> members,
                                             const SwarmView& view, bool* fresh);
  absl::StatusOr<SharedPlan> Search(const PlanInput& input, std::vector<PeerInfo> members,
                                    const SwarmView& view);
  SchedulerPlannerOptions options_;
  std::unique_ptr<scheduler::Planner> planner_;
  InOrderPlanner in_order_;  // full routes over members with several stages
  // Unusable records refused (Note [Planning members] in route_planner.h).
  RefusedRecords refused_;
  // Without a shared cache: the plan of the latest call.
  std::unique_ptr<SharedPlan> own_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_SCHEDULER_PLANNER_H_
