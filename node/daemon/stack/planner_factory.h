// The data node's RoutePlanner, built from the daemon's options: the one
// recipe of both daemons (NodeDaemon over a static --swarm list,
// GossipDaemon over gossip), so a new planner input is wired once.
//
//   std::map<std::string, PeerId> names = ...;      // static lists; empty with gossip
//   SS_ASSIGN_OR_RETURN(std::unique_ptr<RoutePlanner> planner,
//                       CreateDataNodePlanner(options, names, clock));
//
// `clock` (borrowed; must outlive the planner and repairer) dates link
// throughputs: one older than throughput_ttl counts as unknown (Note
// [Planning from measured links] in node/train/scheduler_planner.cc).
//
// What it builds:
//   wan.routes_file set  -> RoutesFilePlanner (replays the file; its node
//                           names need `names`, so static lists only)
//   sdp forward|backward -> SdpPlanner (every hop on the node itself)
//   planner "inorder"    -> InOrderPlanner (full in-order routes)
//   any other planner    -> SchedulerPlanner (DataNodeSchedulerOptions)
//   record_routes set    -> the above inside a RecordingPlanner
// and every node's in-flight repairer options (DaemonRepairerOptions): the
// same costs, so a repair avoids the links the plan avoids.
//
// Thread rule: pure functions (CreateDataNodePlanner reads the routes file
// and opens the record file).
#ifndef SKIPSWARM_NODE_DAEMON_STACK_PLANNER_FACTORY_H_
#define SKIPSWARM_NODE_DAEMON_STACK_PLANNER_FACTORY_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "node/daemon/stack/node_daemon_options.h"
#include "node/train/route_planner.h"
#include "node/train/scheduler_planner.h"
#include "node/train/scheduler_repairer.h"

namespace skipswarm::node {

// Bytes of one micro-batch's activation (or its gradient) on the wire, as
// the daemons' computes send it: samples_per_mb x seq_len x d_model
// elements in o.activation_encode (the codec CreateTorchStageCompute gives
// the computes; float32 by default), or the dummy payload of timed compute
// (wan.timed_forward_s > 0).
double ActivationBytesPerMicroBatch(const NodeDaemonOptions& o);

// The scheduler planner of a data node: planner name, path length, model
// shape, seed and the activation bytes of a hop (Note [Planning from
// measured links] in node/train/scheduler_planner.cc).
SchedulerPlannerOptions DataNodeSchedulerOptions(const NodeDaemonOptions& o,
                                                 common::Clock* clock);

// Every node's SchedulerRouteRepairer (relays repair too): the PlanningCosts
// of DataNodeSchedulerOptions (model shape, bytes_per_mb, link_costs,
// throughput_ttl, clock), so repairs cost hops with the planner's
// PlanningHops (Note [Planning from measured links]). Route rules
// (max_swaps, max_jump) stay the repairer's defaults, as before.
SchedulerRepairerOptions DaemonRepairerOptions(const NodeDaemonOptions& o,
                                               common::Clock* clock);

// See the file comment. InvalidArgument for a routes file without `names`
// (gossip membership) or a bad file; the planner's own errors otherwise.
absl::StatusOr<std::unique_ptr<RoutePlanner>> CreateDataNodePlanner(
    const NodeDaemonOptions& o, const std::map<std::string, PeerId>& names,
    common::Clock* clock);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_STACK_PLANNER_FACTORY_H_
