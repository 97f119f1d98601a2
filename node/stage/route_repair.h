// RouteRepairer: how the node holding a micro-batch chooses the rest of its
// route when the next hop fails (docs/DESIGN.md §5 "Decentralised"): a
// connection error, an ack deadline (HopStats), a peer the view marks dead,
// or a refusal for memory (RESOURCE_EXHAUSTED). The StageServer asks its
// repairer and rewrites header.route after its own hop; every later frame
// and the whole backward then carry the repaired route (Note [Route hops]).
//
//   RepairRequest r{.iteration = it, .mb = mb, .route = hops, .holder = 2,
//                   .failed = {dead}, .allow_shorter = true};
//   SS_ASSIGN_OR_RETURN(std::vector<RouteHop> fixed, repairer.Repair(r, view));
//
// Implementations: ReplicaRouteRepairer below (no planning: another live
// replica of the failed hop's stage, else skip that stage) and
// SchedulerRouteRepairer (node/train/scheduler_repairer.h: the scheduler's
// RerouteInFlight, which may also change the stages still to visit). The
// stage server only sees this interface, so node/stage stays free of the
// scheduler and testable with a fake.
//
// Thread rule: implementations are thread-safe; Repair is called with no
// StageServer lock held, from transport or clock threads.
#ifndef SKIPSWARM_NODE_STAGE_ROUTE_REPAIR_H_
#define SKIPSWARM_NODE_STAGE_ROUTE_REPAIR_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/node_id.h"
#include "node/stage/swarm_view.h"

namespace skipswarm::node {

struct RouteHop {
  common::NodeId node;
  int stage = 0;
};

struct RepairRequest {
  uint64_t iteration = 0;
  uint64_t mb = 0;
  // The route as carried: route[0] is the origin (stage 0), then one hop per
  // visited stage; the return to the origin is implicit.
  std::vector<RouteHop> route;
  // The hop whose forward output must go on (0 = the origin's start). The
  // failed hop is holder + 1. route[0..holder] must stay as they are.
  int holder = 0;
  // Peers that failed this frame; never chosen again.
  std::vector<common::NodeId> failed;
  // Whether the repaired route may visit fewer stages (skip budget).
  bool allow_shorter = false;
};

class RouteRepairer {
 public:
  virtual ~RouteRepairer() = default;
  // The repaired route: route[0..holder] unchanged, then hops on peers the
  // view calls alive and not in `failed`; it may end right after the holder
  // (straight back to the origin) when allow_shorter. ABORTED when no valid
  // completion exists (the MB is dropped).
  virtual absl::StatusOr<std::vector<RouteHop>> Repair(const RepairRequest& request,
                                                       const SwarmView& view) = 0;
};

// Another live replica of the failed hop's stage (spread over replicas by
// mb + iteration, deterministically), else, when allow_shorter, the stage is
// skipped. No cost model: the fallback when no planner is injected.
class ReplicaRouteRepairer final : public RouteRepairer {
 public:
  absl::StatusOr<std::vector<RouteHop>> Repair(const RepairRequest& request,
                                               const SwarmView& view) override;
};

// Checks a repair against its request (prefix kept, no failed or dead peer
// after the holder, not longer than before, shorter only if allowed).
absl::Status CheckRepair(const RepairRequest& request, const SwarmView& view,
                         const std::vector<RouteHop>& repaired);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_STAGE_ROUTE_REPAIR_H_
