#include "sim/hybrid_sim.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "sim/report.h"

namespace skipswarm::sim {
namespace {

using scheduler::HybridPlan;
using scheduler::HybridRow;
using scheduler::HybridSwarm;
using scheduler::NodeRole;

// The universe's initially present nodes as a scheduler scenario.
absl::StatusOr<scheduler::Scenario> InitialSwarm(const SimScenario& sc) {
  const scheduler::TopologyView& u = sc.universe.view;
  std::vector<int> kept;
  for (int v = 0; v < u.num_nodes(); ++v) {
    if (sc.initially_present[v]) kept.push_back(v);
  }
  const size_t m = kept.size();
  std::vector<scheduler::NodeSpec> specs;
  std::vector<double> hops(m * m, 0.0);
  for (size_t i = 0; i < m; ++i) {
    specs.push_back(u.node(kept[i]));
    for (size_t j = 0; j < m; ++j) {
      if (i != j) hops[i * m + j] = u.hop_s(kept[i], kept[j]);
    }
  }
  scheduler::Scenario out;
  out.name = sc.universe.name;
  out.workload = sc.universe.workload;
  SS_ASSIGN_OR_RETURN(out.view, scheduler::TopologyView::Create(u.model(), specs, hops));
  return out;
}

// Runs the plan's pipeline nodes alone in the simulator (no churn).
absl::StatusOr<ReportSummary> SimulatePipeline(const SimScenario& sc, const HybridSwarm& swarm,
                                               const HybridPlan& plan, SimOptions options,
                                               int* iterations) {
  SimScenario sub;
  sub.name = sc.name + " (pipeline part)";
  sub.seed = sc.seed;
  sub.iterations = sc.iterations;
  sub.planner = sc.planner == "replay" ? "skippipe" : sc.planner;
  if (options.planner == "replay") options.planner = "skippipe";
  SS_ASSIGN_OR_RETURN(sub.universe.view, scheduler::PipelineView(swarm, plan.pipeline_nodes));
  sub.universe.name = sub.name;
  sub.universe.workload = swarm.workload;
  const int n = sub.universe.view.num_nodes();
  sub.initially_present.assign(n, true);
  sub.auto_stage.assign(n, false);
  sub.detector = sc.detector;
  sub.state_transfer_s = sc.state_transfer_s;
  sub.reroute_compute_s = sc.reroute_compute_s;
  sub.protect_last_replica = sc.protect_last_replica;
  sub.region_links = sc.region_links;
  sub.hop_overhead_s = sc.hop_overhead_s;
  options.progress = nullptr;
  options.wait_for_replacement = false;
  SS_ASSIGN_OR_RETURN(SimReport report, RunSimulation(sub, options));
  *iterations = static_cast<int>(report.iterations.size());
  return Summarise(report);
}

}  // namespace

absl::StatusOr<std::vector<HybridSimRow>> SimulateHybrid(const SimScenario& sc,
                                                         const scheduler::HybridInputs& in,
                                                         const SimOptions& options) {
  SS_ASSIGN_OR_RETURN(scheduler::Scenario initial, InitialSwarm(sc));
  scheduler::HybridInputs inputs = in;
  if (!sc.uplinks.empty()) {
    std::map<std::string, double> by_name;
    for (const SimScenario::Uplink& u : sc.uplinks) by_name[u.name] = u.bytes_per_s;
    inputs.uplinks.clear();
    for (int v = 0; v < initial.view.num_nodes(); ++v) {
      auto it = by_name.find(initial.view.node(v).name);
      const bool known = it != by_name.end() && it->second > 0;
      inputs.uplinks.push_back(known ? it->second : in.uplink_bytes_per_s);
    }
  }
  SS_ASSIGN_OR_RETURN(HybridSwarm swarm, scheduler::SwarmFromScenario(initial, inputs));
  scheduler::HybridOptions hopts;
  hopts.seed = sc.seed;
  // Plan with the planner the simulator will run (replay: skippipe).
  const std::string planner = options.planner.empty() ? sc.planner : options.planner;
  hopts.planner = planner == "replay" ? "skippipe" : planner;
  std::vector<HybridSimRow> rows;
  for (HybridRow& r : scheduler::CompareHybrid(swarm, hopts, in.selection)) {
    HybridSimRow row;
    row.row = std::move(r);
    const HybridPlan& p = row.row.plan;
    if (row.row.status.ok()) {
      if (!p.pipeline_nodes.empty()) {
        int iterations = 0;
        absl::StatusOr<ReportSummary> s = SimulatePipeline(sc, swarm, p, options, &iterations);
        if (!s.ok()) {
          row.row.status = s.status();
          rows.push_back(std::move(row));
          continue;
        }
        row.sim_pipeline_s = s->mean_iteration_s;
        row.sim_pipeline_mbs = iterations > 0 ? static_cast<double>(s->completed) / iterations : 0;
      }
      row.iteration_s = std::max(row.sim_pipeline_s, p.sdp_s) + p.averaging_s;
      const double tokens_per_mb =
          static_cast<double>(swarm.model.shape.samples_per_mb) * swarm.model.tokens_per_sample;
      const double tokens = (row.sim_pipeline_mbs + p.sdp_mbs) * tokens_per_mb;
      const double activation =
          p.pipeline_mbs > 0 ? p.activation_bytes * row.sim_pipeline_mbs / p.pipeline_mbs : 0;
      if (row.iteration_s > 0) row.tokens_per_s = tokens / row.iteration_s;
      if (tokens > 0) row.bytes_per_token = (activation + p.averaging_bytes) / tokens;
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string FormatHybridSim(const SimScenario& sc, const scheduler::HybridInputs& in,
                            const std::vector<HybridSimRow>& rows) {
  std::string out = absl::StrFormat(
      "hybrid (sim, %d iterations of each plan's pipeline part, executor backend, no churn): "
      "%.0f M parameters, averaging H=%d %s%s\n",
      sc.iterations, in.params / 1e6,
      static_cast<int>(std::max<int64_t>(1, in.averaging.outer_every)),
      model::AvgCodecName(in.averaging.codec),
      in.half_one_stage ? ", every second node: one stage only"
      : in.one_stage_nodes.empty()
          ? ""
          : absl::StrFormat(", %d named nodes: one stage only",
                            static_cast<int>(in.one_stage_nodes.size())));
  out += absl::StrFormat("  %-18s %4s %4s %4s %6s %9s %9s %8s %8s %9s %10s %10s %7s\n", "plan",
                         "pipe", "sdp", "idle", "MBs", "pipe sim", "pipe pred", "sdp s", "avg s",
                         "iter s", "tokens/s", "B/token", "x pipe");
  double base = 0;
  for (const HybridSimRow& r : rows) {
    if (!r.row.status.ok()) {
      out += absl::StrFormat("  %-18s not possible: %s\n", r.row.label, r.row.status.message());
      continue;
    }
    const HybridPlan& p = r.row.plan;
    if (base == 0 && r.row.label == "pipeline-only") base = r.tokens_per_s;
    auto count = [&](NodeRole role) {
      return static_cast<int>(std::count(p.roles.begin(), p.roles.end(), role));
    };
    out += absl::StrFormat(
        "  %-18s %4d %4d %4d %6.1f %9.2f %9.2f %8.2f %8.2f %9.2f %10.0f %10.0f %7s\n",
        r.row.label, count(NodeRole::kPipeline), count(NodeRole::kSdp), count(NodeRole::kIdle),
        r.sim_pipeline_mbs + p.sdp_mbs, r.sim_pipeline_s, p.pipeline_s, p.sdp_s, p.averaging_s,
        r.iteration_s, r.tokens_per_s, r.bytes_per_token,
        base > 0 ? absl::StrFormat("%.2f", r.tokens_per_s / base) : std::string("-"));
  }
  return out;
}

}  // namespace skipswarm::sim
