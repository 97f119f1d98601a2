// Pipeline-only vs SDP-only vs mixed (hybrid_plan.h) on one scenario: the
// table `skipswarm plan --hybrid` and `skipswarm sim --hybrid` print.
//
//   HybridInputs in;                 // what scenario files do not say
//   in.params = 1e9;
//   in.half_one_stage = true;        // the heterogeneous-memory variant
//   SS_ASSIGN_OR_RETURN(HybridSwarm swarm, SwarmFromScenario(scenario, in));
//   std::vector<HybridRow> rows = CompareHybrid(swarm, {});
//   std::cout << FormatHybridTable(swarm, in, rows);
//
// The heterogeneous-memory variant names its small nodes (one_stage_nodes)
// or takes every second one (half_one_stage); a sim scenario's "hybrid"
// object (sim/scenario.h) sets these inputs in the file.
//
// Links for averaging: a scenario gives each node pair's seconds per
// micro-batch hop; with bytes_per_mb known, the pair's bandwidth is taken
// as bytes_per_mb / hop_s (latency and overhead included, so it is a lower
// bound). Uplinks come from `uplinks` (per node) or `uplink_bytes_per_s`.
//
// Thread rule: pure functions.
#ifndef SKIPSWARM_SCHEDULER_HYBRID_COMPARE_H_
#define SKIPSWARM_SCHEDULER_HYBRID_COMPARE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "scheduler/hybrid_plan.h"
#include "scheduler/scenario.h"

namespace skipswarm::scheduler {

// Which plans CompareHybrid makes (--hybrid_mode): all five rows, the
// pipeline-only row, the two SDP-only rows, or the two mixed rows.
enum class HybridSelection { kAll, kPipeline, kSdp, kHybrid };

// "all", "pipeline", "sdp", "hybrid" (or "mixed"); InvalidArgument else.
absl::StatusOr<HybridSelection> ParseHybridSelection(absl::string_view mode);

struct HybridInputs {
  double params = 1e9;          // whole model
  int tokens_per_sample = 1024;
  double activation_gib = 0.5;  // one MB at one stage
  double bytes_per_mb = 0;      // 0: the scenario's model.bytes_per_mb
  double memory_gib = 0;        // every node; <= 0: unlimited
  // The heterogeneous-memory variant: every second node (odd index) can
  // hold one stage only (HybridNode::max_stages = 1): it hosts its stage
  // with its slots and never a subnetwork.
  bool half_one_stage = false;
  // These nodes (by name) hold one stage only, like the odd ones above.
  std::vector<std::string> one_stage_nodes;
  double uplink_bytes_per_s = 0;     // every node; <= 0: unlimited
  std::vector<double> uplinks;       // per node, overrides when not empty
  int sdp_stages = 0;                // 0: the workload's path length
  model::AveragingOptions averaging;
  HybridSelection selection = HybridSelection::kAll;  // plans to make (--hybrid_mode)
};

// Fails with InvalidArgument when `uplinks` does not have one entry per
// node, a name in one_stage_nodes is no node of the scenario, or
// params <= 0.
absl::StatusOr<HybridSwarm> SwarmFromScenario(const Scenario& scenario, const HybridInputs& in);

struct HybridRow {
  std::string label;  // "pipeline-only", "sdp-only forward", "mixed backward", ...
  bool backward_masking = false;
  absl::Status status;
  HybridPlan plan;
};

// Pipeline-only, then SDP-only and mixed with forward and with backward
// masking (the swarm's own masking flag is ignored); `selection` keeps the
// rows of one mode only (in that order).
std::vector<HybridRow> CompareHybrid(const HybridSwarm& swarm, const HybridOptions& options,
                                     HybridSelection selection = HybridSelection::kAll);

// One row per plan: nodes per role, MBs, pipeline / SDP / averaging seconds,
// iteration s, tokens/s, bytes/token and x vs pipeline-only; then the
// mixed plans' roles by node.
std::string FormatHybridTable(const HybridSwarm& swarm, const HybridInputs& in,
                              const std::vector<HybridRow>& rows);

// "pipeline: d0 n1 ..; sdp: n4[0+2+5] ..; idle: .." for one plan.
std::string FormatRoles(const HybridSwarm& swarm, const HybridPlan& plan);

}  // namespace skipswarm::scheduler

#endif  // SKIPSWARM_SCHEDULER_HYBRID_COMPARE_H_
