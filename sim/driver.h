// The simulation driver: a swarm training for N iterations on the simulated
// clock while the scenario's churn trace happens to it.
//
// Per iteration (all on one common::SimClock, Note [Simulated iteration]):
//  1. The data nodes' view: members that joined and finished state transfer,
//     minus those gossip has declared dead (a crashed node stays in the view
//     until the failure detector's delay, sim/detector.h, has passed), with
//     current compute speeds (stragglers are measured) and without links
//     cut by a partition. All data nodes share it (gossip has converged).
//  2. They plan with the scheduler's planner (scheduler/planner.h) on that
//     view, deterministically (seeded, no wall-clock budget); the plan is
//     reused while the view is unchanged.
//  3. The iteration runs in sim/executor.h; churn timers fire during it, and
//     a kill re-routes or drops the MBs it hits.
//  4. The next iteration starts when every MB finished or was dropped
//     (replica averaging is not timed).
// A view that cannot be planned (a stage with no live node, a stage cut off)
// stalls the swarm until the next churn event; with none left the run ends
// early and says why.
//
//   SS_ASSIGN_OR_RETURN(SimScenario sc, LoadSimScenario(path, seed));
//   SimOptions options;              // options.progress = &std::cerr;
//   SS_ASSIGN_OR_RETURN(SimReport report, RunSimulation(sc, options));
//
// Thread rule: RunSimulation is single-threaded and owns everything it uses.
#ifndef SKIPSWARM_SIM_DRIVER_H_
#define SKIPSWARM_SIM_DRIVER_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "sim/scenario.h"

namespace skipswarm::sim {

struct SimOptions {
  std::string planner;  // overrides the scenario's when not empty
  int iterations = 0;   // overrides the scenario's when > 0
  // Baseline "full pipelines that wait for a replacement": no re-routing
  // (a failed hop drops the MB), the other nodes of every route through a
  // dead node sit idle (their fixed pipeline is broken), and an identical
  // replacement serves replacement_s after the crash; then the pipelines
  // are formed again.
  bool wait_for_replacement = false;
  // > 0: every crashed node is replaced by an identical one that serves
  // this long after the crash (both systems in experiment 2). The baseline
  // above needs it (it would wait forever otherwise).
  double replacement_s = 0;
  // "full": re-plan on every view change; "incremental": when nodes only
  // left the view, keep the plan and re-route the MBs that used them.
  std::string replan = "full";
  // Planner knobs (scheduler::PlanRequest).
  int max_evaluations = 20000;
  int stall_evaluations = 2500;
  int candidates_per_stage = 12;
  std::ostream* progress = nullptr;  // progress bar, if set
  // Times planning (wall clock) for SimReport::planning_wall_ms; optional.
  common::Clock* wall_clock = nullptr;
  // Failure detection on the nodes backend (sim/node_swarm.h): "swim" runs
  // membership/'s real SWIM code, one Membership per node
  // (sim/swim_gossip.h); "model" the detector model (sim/detector.h);
  // "auto" SWIM up to swim_max_nodes universe nodes, the model above (its
  // cost, sim/README.md "Speed"). The executor backend always uses the model.
  std::string detection = "auto";
  int swim_max_nodes = 300;
};

struct IterationRecord {
  int index = 0;
  double start_s = 0;
  double time_s = 0;     // simulated duration
  double planned_s = 0;  // the evaluator's prediction for the plan
  int members = 0;       // nodes in the planning view
  int mbs = 0;
  int completed = 0;
  int dropped = 0;
  int rerouted = 0;
  bool replanned = false;
  bool deadlocked = false;  // memory slots waited on each other
};

struct FailureRecord {
  std::string node;
  int stage = 0;
  std::string region;
  std::string cause;
  double at_s = 0;
  // Crash -> dead in every live node's view; -1 if that never happened
  // (the node came back first, or the run ended).
  double gossip_detect_s = 0;
  // Crash -> the first view that called it dead (the model: every view at
  // once, so equal to gossip_detect_s); -1 if none did.
  double first_gossip_detect_s = 0;
  // Crash -> the first MB re-routed around it (new route chosen and the
  // activation sent again); -1 if none was.
  double first_reroute_s = -1;
  int mbs_rerouted = 0;
  int mbs_dropped = 0;
  // Per affected MB: its hop failed -> the holder noticed.
  std::vector<double> detect_s;
  std::vector<double> reroute_s;  // noticed -> new route chosen, resent
  std::vector<double> resume_s;   // noticed -> activation at the new node
};

struct ChurnRecord {  // joins, revivals, stragglers, partitions, spared kills
  double at_s = 0;
  std::string kind;
  std::string what;
};

struct NodeRecord {
  std::string name;
  int stage = 0;
  std::string region;
  double busy_s = 0;
  double utilisation = 0;  // busy / time it was a member
};

struct SimReport {
  std::string scenario;
  uint64_t seed = 0;
  std::string planner;
  std::string detection = "model";  // "swim" or "model" (SimOptions)
  // SWIM only: verdicts DEAD about a member that was alive and reachable
  // from the observer (false positives of the real protocol).
  int gossip_false_dead = 0;
  bool wait_for_replacement = false;
  double replacement_s = 0;
  std::vector<IterationRecord> iterations;
  std::vector<FailureRecord> failures;
  std::vector<ChurnRecord> churn;
  std::vector<NodeRecord> nodes;
  std::vector<int> stage_visits;  // completed MBs' visits, per stage
  int link_failures = 0;  // MBs that met a cut link (partitions)
  double total_s = 0;
  double stalled_s = 0;
  std::string stopped_early;  // why, if the run could not finish
  // Wall-clock planning time is measured but kept out of the JSON report
  // (it would break byte-identical reports); the experiments print it.
  double planning_wall_ms = 0;
  int plans = 0;
  // SWIM: gossip messages sent over the whole run (requests and replies).
  uint64_t gossip_messages = 0;
};

absl::StatusOr<SimReport> RunSimulation(const SimScenario& scenario,
                                        const SimOptions& options);

}  // namespace skipswarm::sim

#endif  // SKIPSWARM_SIM_DRIVER_H_
