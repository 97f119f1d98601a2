// SchedulerRouteRepairer: the RouteRepairer (node/stage/route_repair.h) that
// re-routes a micro-batch in flight with the scheduler's incremental
// re-route, scheduler::RerouteInFlight (docs/DESIGN.md §5 "Decentralised"): the
// cheapest live replica of the failed hop's stage, or the cheapest valid
// completion of the route from the holder (which may visit other stages),
// the same length first, one stage shorter only if the skip budget allows.
// A route through every stage is completed in stage order (no swaps; Note
// [Full routes stay in order] in scheduler_planner.cc).
//
//   SchedulerRepairerOptions o;  o.costs.bytes_per_mb = 4 << 20;  o.costs.clock = clock;
//   SchedulerRouteRepairer repairer(o);
//   StageServerOptions so;  so.repairer = &repairer;  so.allow_skip = true;
//
// The TopologyView is built from the SwarmView per repair with the data
// nodes' planner's costs (node/train/scheduler_planner.h): compute speeds
// from PlanningSpeeds (measured, else the median measured, else the
// costs' estimate) and hop costs from PlanningHops over the view's measured
// links (Note [Planning from measured links]; one formula for plans and
// repairs), so a repair avoids a slow link as the plan does. The view's
// dead members and the request's failed peers are removed. Where nothing is
// measured (static lists) every replica costs the same; ties are broken by
// a deterministic per-(iteration, mb, node) perturbation of compute speed
// of 0.1%, so repairs of different MBs spread over the replicas instead of
// piling onto the lowest id. Views whose members host several stages
// (outside the scheduler's model) fall back to ReplicaRouteRepairer. Cost:
// O(n^2) per repair for n members (the hop table), a few microseconds for a
// daemon swarm of tens of nodes.
//
// The daemons give it their planner's costs (DaemonRepairerOptions
// in node/daemon/stack/planner_factory.h). Costs from outside, when set
// (PlanningCosts::sec_per_layer_sample_of, hop_s_of), replace the view's,
// in the repairer as in the planner: the simulator's nodes backend
// (sim/node_swarm.h) sets them to the scenario's.
//
// Thread rule: thread-safe (its only mutable state, the refused records'
// log, has its own lock).
#ifndef SKIPSWARM_NODE_TRAIN_SCHEDULER_REPAIRER_H_
#define SKIPSWARM_NODE_TRAIN_SCHEDULER_REPAIRER_H_

#include <vector>

#include "node/stage/route_repair.h"
#include "node/train/scheduler_planner.h"

namespace skipswarm::node {

struct SchedulerRepairerOptions {
  // Compute and hop costs as the planner's (PlanningSpeeds, PlanningHops;
  // Note [Planning from measured links]); costs.clock, when set, must
  // outlive the repairer.
  PlanningCosts costs;
  int max_swaps = 2;                   // route rules (scheduler::Workload);
                                       // full routes: 0
  int max_jump = 4;
  // The model's stages including the data stage (PlanInput::num_stages);
  // a record naming a stage outside them is refused (Note [Planning
  // members] in route_planner.h). 0: unknown, only stages < 0 are.
  int num_stages = 0;
};

class SchedulerRouteRepairer final : public RouteRepairer {
 public:
  explicit SchedulerRouteRepairer(SchedulerRepairerOptions options) : options_(options) {}

  absl::StatusOr<std::vector<RouteHop>> Repair(const RepairRequest& request,
                                               const SwarmView& view) override;

 private:
  const SchedulerRepairerOptions options_;
  ReplicaRouteRepairer fallback_;
  RefusedRecords refused_;  // thread-safe
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_SCHEDULER_REPAIRER_H_
