// The real-node backend of `skipswarm sim` (`--sim_backend=nodes`): the
// scenario's swarm run by node/'s own classes on one SimClock, with the
// scenario's whole churn trace, reported in the same SimReport (and so the
// same JSON, sim/report.h) as the executor backend (sim/driver.h).
//
// Every node is a StageServer (+ DataNodeDriver on data nodes) with a
// NodeTrainer that averages replicas through an InProcessGroupHub, on
// TimedStageCompute (forward = the scenario's c_v), over the in-process
// switchboard wrapped in a ShapingTransport (per-peer latency = the
// scenario's hop time, bandwidth unlimited, so one frame takes exactly the
// cost model's d(u, v)). Data nodes plan with the daemons'
// node::SchedulerPlanner and stage servers re-route with their
// node::SchedulerRouteRepairer (the scheduler's RerouteInFlight), given the
// scenario's costs where a daemon has its measurements, the data nodes
// sharing their plans through a node::PlanCache (sim/node_planning.h). The world — crashes, the failure detector's verdicts,
// stragglers, partitions — reaches them only through the seams of
// sim/node_world.h; failure detection is membership/'s real SWIM code, one
// Membership per node on the same clock (sim/swim_gossip.h), or the
// detector model for larger swarms. No libtorch.
//
// Churn, as played here (Note [Real-node churn]):
//  * kill / poisson_failures / correlated_failures / region_outage: the
//    node's server, trainer and transport are torn down at the crash; peers
//    notice through failed sends and broken streams (stream_timeout_s, see
//    NodeWorld). With SimOptions::detection "swim" (the default up to
//    swim_max_nodes) its Membership stops and each node's view drops it
//    when that node's own Membership calls it dead (sim/swim_gossip.h); the
//    replica hub drops it once every live view has. With "model" every view
//    and the hub call it dead at the detector model's delay (sim/detector.h,
//    as the executor backend). Random victims are
//    drawn exactly as sim/driver.h draws them (same seed stream, same rule
//    for sparing a stage's last node), so both backends kill the same nodes
//    at the same times.
//  * revivals (region outage end, SimOptions::replacement_s) and joins:
//    the node gets a fresh server and compute (same identity for a
//    revival) once its state transfer is done, and starts at the next
//    iteration boundary (a data node's first report after that): the hub
//    counts it from that iteration (InProcessGroupHub::Admit) and the
//    trainer's digest re-sync copies a replica's state. A joiner with
//    "stage": "auto" gets the stage the scheduler's ChooseStageForJoiner
//    picks when it joins, as in sim/driver.h.
//  * stragglers: compute held longer (WorldCompute); planners see the
//    measured speed at once, as in the executor backend.
//  * partitions: sends across the cut fail after the stream timeout.
//
// Report fields come from what the real code did: iteration times from the
// trainers' reports, MBs from the data nodes' OriginListener events, every
// re-route from the repairer call (detect_s = the failed send's start, or
// the crash if later, to the repair; reroute_s = 0: the stage server
// re-sends in the same instant; resume_s adds the hop to the new node), and
// drops are attributed to the crashed node their status names, else to the
// latest crash before them.
//
//   SS_ASSIGN_OR_RETURN(SimReport r, RunNodeSimulation(scenario, options));
//   std::string json = ReportJson(r);
//
// Not supported: SimOptions::wait_for_replacement (the full-pipeline
// baseline is a policy of the executor backend).
//
// Thread rule: single-threaded (everything runs on the SimClock's thread).
#ifndef SKIPSWARM_SIM_NODE_SWARM_H_
#define SKIPSWARM_SIM_NODE_SWARM_H_

#include "absl/status/statusor.h"
#include "sim/driver.h"
#include "sim/scenario.h"

namespace skipswarm::sim {

absl::StatusOr<SimReport> RunNodeSimulation(const SimScenario& scenario,
                                            const SimOptions& options);

}  // namespace skipswarm::sim

#endif  // SKIPSWARM_SIM_NODE_SWARM_H_
