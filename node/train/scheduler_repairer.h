// SchedulerRouteRepairer: the RouteRepairer (node/stage/route_repair.h) that
// re-routes a micro-batch in flight with the scheduler's incremental
// re-route, scheduler::RerouteInFlight (DESIGN.md §5 "Decentralised"): the
// cheapest live replica of the failed hop's stage, or the cheapest valid
// completion of the route from the holder (which may visit other stages),
// the same length first, one stage shorter only if the skip budget allows.
// A route through every stage is completed in stage order (no swaps; Note
// [Full routes stay in order] in scheduler_planner.cc).
//
//   SchedulerRepairerOptions o{.path_rules = {.max_swaps = 2, .max_jump = 4}};
//   SchedulerRouteRepairer repairer(o);
//   StageServerOptions so;  so.repairer = &repairer;  so.allow_skip = true;
//
// The TopologyView is built from the SwarmView per repair, like
// SchedulerPlanner's (uniform compute and hop estimates until gossip
// measures them), with the view's dead members and the request's failed
// peers removed. With uniform estimates every replica costs the same; ties
// are broken by a deterministic per-(iteration, mb, node) perturbation of
// compute speed of 0.1%, so repairs of different MBs spread over the
// replicas instead of piling onto the lowest id. Views whose members host
// several stages (outside the scheduler's model) fall back to
// ReplicaRouteRepairer. Cost: O(n^2) per repair for n members (the hop
// table), a few microseconds for a daemon swarm of tens of nodes.
//
// Measured costs, when set (SchedulerRepairerOptions::costs), replace the
// uniform estimates: per-member compute speed and per-pair hop time. The
// simulator's real-node backend (sim/node_swarm.h) sets them to the
// scenario's; gossip-measured samples can feed the same seam.
//
// Thread rule: thread-safe (no mutable state).
#ifndef SKIPSWARM_NODE_TRAIN_SCHEDULER_REPAIRER_H_
#define SKIPSWARM_NODE_TRAIN_SCHEDULER_REPAIRER_H_

#include <functional>
#include <vector>

#include "node/stage/route_repair.h"

namespace skipswarm::node {

struct SchedulerRepairerOptions {
  int layers_per_stage = 1;
  int samples_per_mb = 1;
  double sec_per_layer_sample = 1e-3;  // estimate until measured
  double hop_s = 0.01;                 // estimate until measured
  int max_swaps = 2;                   // route rules (scheduler::Workload);
                                       // full routes: 0
  int max_jump = 4;
  // Measured costs; each unset one falls back to the estimate above.
  // hop_s may return scheduler::kNoLink (infinity) for an unusable link.
  std::function<double(const common::NodeId&)> sec_per_layer_sample_of;
  std::function<double(const common::NodeId& from, const common::NodeId& to)> hop_s_of;
};

class SchedulerRouteRepairer final : public RouteRepairer {
 public:
  explicit SchedulerRouteRepairer(SchedulerRepairerOptions options) : options_(options) {}

  absl::StatusOr<std::vector<RouteHop>> Repair(const RepairRequest& request,
                                               const SwarmView& view) override;

 private:
  const SchedulerRepairerOptions options_;
  ReplicaRouteRepairer fallback_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_SCHEDULER_REPAIRER_H_
