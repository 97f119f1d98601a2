// SchedulerPlanner: a RoutePlanner backed by scheduler/'s planners
// ("pipeline", "noskip", "random", "skippipe", chosen by name; DESIGN.md §5).
// Every data node builds the same TopologyView from its SwarmView and plans
// the whole iteration with the same seed (iteration-derived), so all data
// nodes compute the same plan and each injects the routes whose origin it
// is; no coordinator is needed.
//
//   SchedulerPlannerOptions o{.planner = "skippipe", .path_length = 4};
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
// simulator) plans with the uniform estimate in the options, as before.
// Hop costs are still the uniform `hop_s` estimate (the planner balances
// load, compute speed, memory slots and collisions and respects the route
// rules; network awareness comes with measured link costs).
// Each node must host exactly one stage (the scheduler's model); for full
// routes a view where some member hosts several stages (static --swarm
// lists like 1+2) is planned by InOrderPlanner instead, as
// SchedulerRouteRepairer falls back to ReplicaRouteRepairer.
//
// Thread rule: one caller at a time.
#ifndef SKIPSWARM_NODE_TRAIN_SCHEDULER_PLANNER_H_
#define SKIPSWARM_NODE_TRAIN_SCHEDULER_PLANNER_H_

#include <memory>
#include <string>

#include "node/train/route_planner.h"
#include "scheduler/planner.h"

namespace skipswarm::node {

struct SchedulerPlannerOptions {
  std::string planner = "skippipe";
  int path_length = 0;        // P (stages visited incl. 0); 0 = all stages
  // Route rules (scheduler::Workload) of skip routes; full routes never
  // swap (Note [Full routes stay in order]).
  int max_swaps = 2;
  int max_jump = 4;
  int layers_per_stage = 1;
  int samples_per_mb = 1;
  double sec_per_layer_sample = 1e-3;  // estimate while no member is measured
  double hop_s = 0.01;                 // estimate (links are not measured here yet)
  uint64_t seed = 1;
};

// A measured speed rounded to the nearest power of 1.25 (kSpeedBucket), so
// two views whose measurements differ by a few percent give the same value
// (Note [Planning from measured speeds]). REQUIRES: seconds > 0.
inline constexpr double kSpeedBucket = 1.25;
double QuantizeMeasuredSpeed(double seconds);

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
  SchedulerPlannerOptions options_;
  std::unique_ptr<scheduler::Planner> planner_;
  InOrderPlanner in_order_;  // full routes over members with several stages
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_SCHEDULER_PLANNER_H_
