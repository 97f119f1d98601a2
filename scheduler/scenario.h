// Scenario files: a topology view, a workload and optional named route sets
// (for the `replay` planner), read from JSON.
//
// Two formats are accepted.
//
// 1. SkipSwarm's own (see scheduler/scenarios/gcp12-24.json):
//   {
//     "name": "two-regions",
//     "model": {"num_stages": 3, "layers_per_stage": 4, "samples_per_mb": 2,
//               "bytes_per_mb": 8388608,
//               "activation_gib_per_mb": 1.5},        // optional
//     "workload": {"mb_per_data_node": 4, "path_length": 3,  // optional,
//                  "max_swaps": 2, "max_jump": 4,           // defaults as
//                  "balance_tolerance": 0.1},               // in Workload
//     "hop_overhead_s": 0.0,                                 // optional
//     "region_links": [                  // a link per region pair; a == b is
//       {"a": "eu", "b": "us", "latency_ms": 80, "bandwidth_gib_s": 0.02}],
//     "node_links": [                    // optional per-node-pair overrides
//       {"a": "d0", "b": "n1", "transfer_s": 0.4}],
//     "nodes": [{"name": "d0", "stage": 0, "region": "eu",
//                "sec_per_layer_sample": 0.05,
//                "memory_slots": 3}],     // or "memory_gib": 8 (slots =
//                                         // floor(memory / activation))
//     "routes": {"mine": [               // optional, for --planner=replay
//       {"origin": "d0", "nodes": ["d0", "n1", "n2", "d0"], "mbs": 2,
//        "priority": 0, "release_s": 0}]}
//   }
//   Nodes in regions with no region_link between them have no link.
//   A route entry without "mbs" shares its origin's M micro-batches
//   round-robin with the origin's other mbs-less entries.
//
// 2. SkipPipe's planner output (schedule.json): `delays` (n x n seconds to
//   move one MB between nodes), `partitions` (node lists per stage, stage 0 =
//   data nodes), `memory` (slots per node), `locations` (regions), and route
//   sets `ca-paths`, `non-ca-paths`, `random-paths` ({entry: {from: to}},
//   each entry one data node's route carrying a share of its M MBs). Compute
//   is not in the file: forward_s per MB per stage comes from the options.
//
//   SS_ASSIGN_OR_RETURN(Scenario sc, LoadScenarioFile(path, options));
//   SS_ASSIGN_OR_RETURN(Plan replay, sc.RouteSet("ca-paths"));
//
// Every error names the field or node at fault. Thread rule: plain values.
#ifndef SKIPSWARM_SCHEDULER_SCENARIO_H_
#define SKIPSWARM_SCHEDULER_SCENARIO_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "scheduler/route.h"
#include "scheduler/topology.h"

namespace skipswarm::scheduler {

struct Scenario {
  std::string name;
  TopologyView view;
  Workload workload;
  // Named route sets, expanded to one Route per MB (mb ids 0..).
  std::map<std::string, Plan> route_sets;

  absl::StatusOr<Plan> RouteSet(const std::string& key) const;
};

// Settings for SkipPipe files, which lack them. Ignored for our format
// except where noted.
struct SkipPipeOptions {
  double forward_s = 0.44;  // forward seconds per MB per stage, every node
  int path_length = 4;
  int mb_per_data_node = 6;
};

// Parses either format (SkipPipe's is recognised by its "delays" key).
absl::StatusOr<Scenario> ParseScenario(absl::string_view json_text,
                                       const SkipPipeOptions& skippipe = {});
absl::StatusOr<Scenario> LoadScenarioFile(const std::string& path,
                                          const SkipPipeOptions& skippipe = {});

// A route given from outside: `mbs` < 0 means "share the origin's MBs".
struct RouteSpec {
  int origin = 0;
  std::vector<int> nodes;  // origin first and last
  int mbs = -1;
  int priority = 0;
  double release_s = 0;
};
// Expands route specs to a plan with one Route per MB. Fails if an origin
// gets more or fewer MBs than the workload says.
absl::StatusOr<Plan> ExpandRoutes(const TopologyView& view,
                                  const Workload& workload,
                                  const std::vector<RouteSpec>& specs);

}  // namespace skipswarm::scheduler

#endif  // SKIPSWARM_SCHEDULER_SCENARIO_H_
