// The scenario's swarm run by the real node code: every node is a
// StageServer (+ DataNodeDriver on data nodes) with a NodeTrainer that
// averages replicas through an InProcessGroupHub, on TimedStageCompute
// (forward time = the scenario's c_v), over the in-process switchboard
// wrapped in a ShapingTransport per node whose per-peer link latency is the
// scenario's hop time for that pair (bandwidth left unlimited, so one
// frame's transfer takes exactly the cost model's d(u, v); the uplink /
// downlink contention of the shaper is not used). Data nodes plan with the
// scheduler's planner (SchedulerRoutePlanner below) from their SwarmView.
// All on one SimClock: deterministic, no libtorch.
//
// This is the "real node" backend: no protocol logic of its own, unlike
// sim/executor.h. It does not yet run the whole churn trace (only kills at
// given times: ExplicitKills) nor gossip (the SwarmView is the static member
// list, updated by the nodes' own failure verdicts).
//
//   NodeSwarmOptions o;  o.iterations = 3;  o.kills = {{"nl-s1-0", 2.0}};
//   SS_ASSIGN_OR_RETURN(NodeSwarmResult r, RunNodeSwarm(scenario, o));
//
// Thread rule: single-threaded (everything runs on the SimClock's thread).
#ifndef SKIPSWARM_SIM_NODE_SWARM_H_
#define SKIPSWARM_SIM_NODE_SWARM_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/scenario.h"

namespace skipswarm::sim {

struct NodeSwarmOptions {
  std::string planner;  // empty: the scenario's
  int iterations = 1;
  std::vector<std::pair<std::string, double>> kills;  // node name, at_s
  int max_evaluations = 3000;
  int stall_evaluations = 500;
  std::string replay_key;  // route set for planner "replay"
};

struct NodeSwarmResult {
  std::vector<double> iteration_s;  // per iteration (data nodes' max)
  int completed = 0;
  int dropped = 0;
  int rerouted = 0;  // route repairs done by stage servers
  double total_s = 0;
};

absl::StatusOr<NodeSwarmResult> RunNodeSwarm(const SimScenario& scenario,
                                             const NodeSwarmOptions& options);

// The scenario's explicit kills ("kill" entries, region outages, correlated
// failures) as NodeSwarmOptions::kills; `unsupported` counts the churn
// events this backend cannot play yet (joins, random kills, stragglers,
// partitions, revivals).
std::vector<std::pair<std::string, double>> ExplicitKills(
    const SimScenario& scenario, int* unsupported);

// {"scenario", "seed", "backend": "nodes", "planner", "total_s",
//  "completed", "dropped", "rerouted", "unsupported_churn_events",
//  "iterations": [{"index", "time_s"}]}; deterministic.
std::string NodeSwarmJson(const SimScenario& scenario,
                          const std::string& planner,
                          const NodeSwarmResult& result, int unsupported);

}  // namespace skipswarm::sim

#endif  // SKIPSWARM_SIM_NODE_SWARM_H_
