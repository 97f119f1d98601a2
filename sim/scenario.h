// Simulation scenarios: a swarm topology, a workload, how many iterations to
// run with which planner, the failure detector's timing and a churn trace.
// The full format is documented in sim/README.md; in short:
//
//   {
//     "name": "gcp12-42",
//     "iterations": 20, "planner": "skippipe", "replay_key": "ca-paths",
//     "topology_file": "skippipe-gcp20-schedule.json",   // either a file in
//         // scheduler/'s format or SkipPipe's schedule.json (relative to
//         // this file), or an inline "topology" object: scheduler/'s format
//         // (scheduler/scenario.h) plus generators expanded here:
//     "topology": {
//       "model": {...}, "workload": {...},
//       "links_csv": "gcp12-links.csv",  "compute_csv": "gcp12-compute.csv",
//       "intra_region": {"latency_ms": 1, "bandwidth_gib_s": 1},
//       "groups": [{"regions": ["Belgium"], "stages": [0, 1], "count": 2,
//                   "memory_slots": 3, "speed_factor": 1.0,
//                   "speed_spread": 0.2}]},
//     "skippipe": {"forward_s": 0.44, "path_length": 4, "mb_per_data_node": 6},
//     "workload": {...},                     // overrides the topology's
//     "detector": {"probe_interval_s": 0.5, "suspicion_timeout_s": 1.2,
//                  "stream_timeout_s": 0.5},       // sim/detector.h
//     "state_transfer_s": 10, "protect_last_replica": true,
//     "hybrid": {"params": 1e9, "bytes_per_mb": 67108864, "memory_gib": 80,
//                "outer_every": 32, "one_stage_nodes": ["n1", "n3"]},
//         // inputs of `sim --hybrid` (scheduler/hybrid_compare.h
//         // HybridInputs; also tokens_per_sample, activation_gib,
//         // uplink_mbit, sdp_stages, avg_codec, half_one_stage); command
//         // line --hybrid_* flags off their defaults replace single values
//     "churn": [{"type": "kill", "node": "belgium-s1-0", "at_s": 30}, ...]
//   }
//
// Loading expands the churn trace with the run's seed (Poisson draws), adds
// every node that may join to the "universe" topology (absent until its
// join), and validates everything; errors name the field at fault.
//
//   SS_ASSIGN_OR_RETURN(SimScenario sc, LoadSimScenario(path, /*seed=*/7));
//
// Thread rule: plain values.
#ifndef SKIPSWARM_SIM_SCENARIO_H_
#define SKIPSWARM_SIM_SCENARIO_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/averaging_options.h"
#include "scheduler/hybrid_compare.h"
#include "scheduler/scenario.h"
#include "sim/churn.h"
#include "sim/detector.h"

namespace skipswarm::sim {

struct SimScenario {
  std::string name;
  std::string source_path;  // the file it came from ("" if parsed from text)
  uint64_t seed = 0;        // the run's seed (drives churn expansion)
  int iterations = 10;
  std::string planner = "skippipe";
  std::string replay_key;   // route set for planner "replay"
  // Every node that is ever part of the swarm: the initial members and all
  // joiners (absent until their join). Workload and route sets as loaded.
  scheduler::Scenario universe;
  std::vector<bool> initially_present;  // per universe node
  std::vector<bool> auto_stage;         // joiner whose stage is chosen late
  DetectorParams detector;
  double state_transfer_s = 10;  // a joiner serves this long after joining
  double reroute_compute_s = 0.001;  // sim/executor.h
  // Random failures never take the last live node of a stage (the swarm
  // would move a node there instead); explicit kills and outages may.
  bool protect_last_replica = true;
  ChurnTrace churn;              // expanded, sorted by time
  // The region link table the topology was built from (empty for SkipPipe
  // files, whose per-node-pair delays are all there is), keyed by the
  // region pair in ascending order, and the fixed per-hop overhead. The WAN
  // emulation of real daemons (launcher/wan_local.h) shapes links with it.
  std::map<std::pair<std::string, std::string>, scheduler::LinkSpec> region_links;
  double hop_overhead_s = 0;
  // Replica averaging's cost (scheduler/averaging_cost.h), when the
  // scenario has an "averaging" object: {"model_params": N, "compare":
  // [{"outer_every": H, "avg_codec": "int8"}, ...]} (the first entry is the
  // baseline the others are compared with). Each topology node's uplink
  // comes from its group's "uplink_mbit" (a number, or [low, high] spread
  // over the group's nodes; absent: unlimited).
  struct Averaging {
    double model_params = 0;
    std::vector<model::AveragingOptions> compare;
  };
  std::optional<Averaging> averaging;
  // The "hybrid" object: what `sim --hybrid` assumes about the model,
  // memory and averaging (unknown keys and bad values are refused; node
  // names are checked when the swarm is built).
  std::optional<scheduler::HybridInputs> hybrid;
  struct Uplink {
    std::string name;
    int stage = 0;
    double bytes_per_s = 0;  // 0: unlimited
  };
  std::vector<Uplink> uplinks;  // initial topology nodes (not SkipPipe files)
};

// `base_dir` resolves relative file names inside the scenario.
absl::StatusOr<SimScenario> ParseSimScenario(absl::string_view json_text,
                                             const std::string& base_dir,
                                             uint64_t seed);
absl::StatusOr<SimScenario> LoadSimScenario(const std::string& path,
                                            uint64_t seed);

}  // namespace skipswarm::sim

#endif  // SKIPSWARM_SIM_SCENARIO_H_
