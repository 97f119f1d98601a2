// Incremental re-planning when a node dies (docs/DESIGN.md §5, "Decentralised").
//
//   // Between iterations: gossip says node 7 is dead.
//   SS_ASSIGN_OR_RETURN(ReplanResult r,
//                       ReplanWithoutNode(view, workload, plan, 7));
//   // r.view no longer routes through 7; r.plan only differs in the routes
//   // that used it (r.rerouted lists their mb ids).
//
//   // Mid-iteration: MB forwarded at route.nodes[2], the send to
//   // route.nodes[3] failed.
//   SS_ASSIGN_OR_RETURN(Route fixed, RerouteInFlight(view, workload, route,
//                                                   /*hop=*/2, dead));
//
// Both are deterministic and fast (no search over the whole plan): a
// dead hop is replaced by the alive replica of the same stage that adds
// least (link + compute + current load); an in-flight MB also considers the
// best whole completion of its route from where it is (RouteSearcher), so
// it may change the stages it still has to visit; when no replica of a
// stage is left, the stage is skipped if the rules allow a shorter route.
// Thread rule: pure functions.
#ifndef SKIPSWARM_SCHEDULER_REPLAN_H_
#define SKIPSWARM_SCHEDULER_REPLAN_H_

#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/route.h"
#include "scheduler/topology.h"

namespace skipswarm::scheduler {

struct ReplanResult {
  TopologyView view;         // `view` with the node dead
  Plan plan;                 // routes through the dead node replaced
  std::vector<int> rerouted; // mb ids whose route changed
  std::vector<int> dropped;  // mb ids whose origin was the dead node
};

// REQUIRES: every route in `plan` is structurally valid for `view`.
// Fails with InvalidArgument for a bad node index, FailedPrecondition if a
// route cannot be repaired (no replica left and skipping breaks the rules).
absl::StatusOr<ReplanResult> ReplanWithoutNode(const TopologyView& view,
                                               const Workload& workload,
                                               const Plan& plan, int dead);

// An MB has run its forward on route.nodes[hop] (0 <= hop < P) and its next
// node `dead` (== route.nodes[hop + 1]) is gone. Returns the repaired route:
// the first hop + 1 nodes unchanged, the rest the cheapest valid
// completion on live nodes (same path length when possible). Aborted when
// there is nothing left to route to (the MB must restart).
absl::StatusOr<Route> RerouteInFlight(const TopologyView& view,
                                      const Workload& workload,
                                      const Route& route, int hop, int dead);

}  // namespace skipswarm::scheduler

#endif  // SKIPSWARM_SCHEDULER_REPLAN_H_
