// WAN emulation of a simulation scenario with the real daemons:
// `skipswarm local --wan=SCENARIO` runs one `skipswarm node` process per
// scenario node on loopback, over real gRPC, each with its pipeline
// transport wrapped in a ShapingTransport (node/transport/wan_table.h) that
// applies the scenario's links: one-way latency and a token-bucket
// bandwidth per link, per node pair.
//
// What is real and what is not:
//  * real: the daemons (node/daemon), gRPC streams on loopback, frame
//    validation, the stage servers' admission and task order, the data-node
//    drivers, barriers and replica averaging over gRPC, wall-clock time.
//  * emulated: the links (latency and bandwidth by the shaper, on the real
//    clock), and, by default (--wan_compute=timed), compute: a
//    TimedStageCompute per stage takes the scenario's c_v (forward; 1.5 c_v
//    backward) and sends dummy payloads of --wan_payload_bytes; bandwidths
//    are scaled by payload / bytes_per_mb so a frame takes the scenario's
//    transfer time. Why timed: the fidelity check compares against the
//    scenario's compute table, and 6-20 libtorch processes on a shared
//    2-core machine would measure CPU contention, not the scenario.
//    --wan_compute=torch trains the real model instead (compute then is
//    whatever the model costs here, not the scenario's).
//  * routes: planned once here with the scheduler on the scenario's own
//    topology, exactly as `skipswarm sim` plans (same planner, seed and
//    effort), and replayed by every data node (RoutesFilePlanner): the
//    daemons' own planner knows only uniform estimates until gossip
//    measures links.
//  * time scale k (--wan_time_scale): latencies and compute / k, bandwidths
//    x k; the run is k times faster and reported times are measured x k.
//
// After the run it prints the measured iteration time next to the
// simulator's for the same routes (and writes wan-compare.txt in the run
// folder): the fidelity check.
//
// Thread rule: main's thread only.
#ifndef SKIPSWARM_LAUNCHER_WAN_LOCAL_H_
#define SKIPSWARM_LAUNCHER_WAN_LOCAL_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "launcher/local_command.h"
#include "node/transport/wan_table.h"
#include "scheduler/route.h"
#include "sim/scenario.h"

namespace skipswarm::launcher {

inline constexpr char kWanLocalFlagsFile[] = "launcher/wan_local.cc";

struct WanSetupOptions {
  std::string planner;           // empty: the scenario's
  int max_evaluations = 3000;    // as `skipswarm sim`'s default
  double payload_bytes = 256 << 10;  // real bytes per frame (<= bytes_per_mb)
  bool timed_compute = true;
};

struct WanSetup {
  std::string planner;
  scheduler::Plan plan;          // in universe indices
  double planned_s = 0;          // the evaluator's iteration time for it
  // The same with links contending (a link carries one MB at a time, as
  // the emulated links do; the simulator's links do not contend).
  double planned_contention_s = 0;
  node::WanTable table;          // bandwidths scaled to payload_bytes
  std::string routes;            // RoutesFilePlanner text
  double payload_bytes = 0;
  // Per node: config keys for its daemon (JSON members), by name.
  std::vector<LocalNodePlan> nodes;
  bool per_node_links = false;   // links from per-pair hop times (no region table)
};

// Plans and lays out the scenario's initial members (churn is not played).
absl::StatusOr<WanSetup> MakeWanSetup(const sim::SimScenario& scenario,
                                      const WanSetupOptions& options);

// One iteration of `scenario` in the simulator (executor) on exactly
// `plan`'s routes: the simulated figure the real run is compared with.
absl::StatusOr<double> SimulatedIterationSeconds(const sim::SimScenario& scenario,
                                                 const scheduler::Plan& plan);

// The scenario's explicit kills ("kill" churn entries) for the launcher:
// node name -> k for the launcher's --kill=NAME@k (SIGKILL once iteration k
// is reported; the real run's iteration 0 opens the streams, so this is the
// start of the scenario's iteration k = floor(at_s / iteration_s), the one
// the kill falls in). `skipped` counts the other churn events, which the
// WAN emulation does not play.
std::map<std::string, int64_t> ScheduledKills(const sim::SimScenario& scenario, double iteration_s,
                                              int* skipped);

// Per iteration, the slowest data node's iteration_s in a progress.jsonl
// written by the daemons.
absl::StatusOr<std::map<int, double>> ReadIterationTimes(const std::string& progress_file);

// The hook for LocalCommand (local_command.h): reads --wan and friends (this file's
// flags plus --wan_time_scale, node/transport/shaping_flags.h).
LocalSwarmPlanner WanLocalPlanner();

}  // namespace skipswarm::launcher

#endif  // SKIPSWARM_LAUNCHER_WAN_LOCAL_H_
