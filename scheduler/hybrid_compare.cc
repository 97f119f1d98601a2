#include "scheduler/hybrid_compare.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace skipswarm::scheduler {
namespace {

int Count(const HybridPlan& p, NodeRole role) {
  return static_cast<int>(std::count(p.roles.begin(), p.roles.end(), role));
}

bool OneStage(const HybridInputs& in, int v, const std::string& name) {
  if (in.half_one_stage && v % 2 == 1) return true;
  return std::find(in.one_stage_nodes.begin(), in.one_stage_nodes.end(), name) !=
         in.one_stage_nodes.end();
}

}  // namespace

absl::StatusOr<HybridSelection> ParseHybridSelection(absl::string_view mode) {
  if (mode == "all") return HybridSelection::kAll;
  if (mode == "pipeline") return HybridSelection::kPipeline;
  if (mode == "sdp") return HybridSelection::kSdp;
  if (mode == "hybrid" || mode == "mixed") return HybridSelection::kHybrid;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown mode \"", mode, "\" (all, pipeline, sdp, hybrid)"));
}

absl::StatusOr<HybridSwarm> SwarmFromScenario(const Scenario& scenario, const HybridInputs& in) {
  const TopologyView& view = scenario.view;
  const int n = view.num_nodes();
  if (!(in.params > 0)) return absl::InvalidArgumentError("params must be > 0");
  if (!in.uplinks.empty() && static_cast<int>(in.uplinks.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("uplinks has ", in.uplinks.size(), " entries for ", n, " nodes"));
  }
  std::set<std::string> names;
  for (int v = 0; v < n; ++v) names.insert(view.node(v).name);
  for (const std::string& name : in.one_stage_nodes) {
    if (names.count(name) == 0) {
      return absl::InvalidArgumentError(absl::StrCat("one_stage_nodes: no node \"", name, "\""));
    }
  }
  HybridSwarm s;
  s.model.shape = view.model();
  if (in.bytes_per_mb > 0) s.model.shape.bytes_per_mb = in.bytes_per_mb;
  s.model.tokens_per_sample = in.tokens_per_sample;
  s.model.params = in.params;
  s.model.activation_gib = in.activation_gib;
  s.model.sdp_stages = in.sdp_stages;
  s.workload = scenario.workload;
  s.averaging = in.averaging;
  for (int v = 0; v < n; ++v) {
    HybridNode node;
    node.spec = view.node(v);
    node.memory_gib = in.memory_gib;
    if (OneStage(in, v, node.spec.name)) node.max_stages = 1;
    node.uplink_bytes_per_s = in.uplinks.empty() ? in.uplink_bytes_per_s : in.uplinks[v];
    s.nodes.push_back(node);
  }
  s.hop_s.resize(static_cast<size_t>(n) * n);
  s.link_bytes_per_s.assign(static_cast<size_t>(n) * n, 0.0);
  for (int u = 0; u < n; ++u) {
    for (int v = 0; v < n; ++v) {
      const double h = u == v ? 0 : view.hop_s(u, v);
      s.hop_s[u * n + v] = h;
      if (u != v && h > 0 && s.model.shape.bytes_per_mb > 0) {
        s.link_bytes_per_s[u * n + v] = s.model.shape.bytes_per_mb / h;
      }
    }
  }
  return s;
}

std::vector<HybridRow> CompareHybrid(const HybridSwarm& swarm, const HybridOptions& options,
                                     HybridSelection selection) {
  std::vector<HybridRow> rows;
  auto add = [&](const std::string& label, HybridMode mode, bool backward) {
    const HybridSelection of = mode == HybridMode::kPipelineOnly ? HybridSelection::kPipeline
                               : mode == HybridMode::kSdpOnly    ? HybridSelection::kSdp
                                                                 : HybridSelection::kHybrid;
    if (selection != HybridSelection::kAll && selection != of) return;
    HybridSwarm s = swarm;
    s.model.backward_masking = backward;
    HybridOptions o = options;
    o.mode = mode;
    HybridRow row;
    row.label = label;
    row.backward_masking = backward;
    absl::StatusOr<HybridPlan> p = AllocateHybrid(s, o);
    if (p.ok()) {
      row.plan = *std::move(p);
    } else {
      row.status = p.status();
    }
    rows.push_back(std::move(row));
  };
  add("pipeline-only", HybridMode::kPipelineOnly, false);
  add("sdp-only forward", HybridMode::kSdpOnly, false);
  add("mixed forward", HybridMode::kMixed, false);
  add("sdp-only backward", HybridMode::kSdpOnly, true);
  add("mixed backward", HybridMode::kMixed, true);
  return rows;
}

std::string FormatRoles(const HybridSwarm& swarm, const HybridPlan& plan) {
  std::vector<std::string> pipe, sdp, idle;
  for (size_t v = 0; v < plan.roles.size(); ++v) {
    const NodeSpec& spec = swarm.nodes[v].spec;
    switch (plan.roles[v]) {
      case NodeRole::kPipeline:
        pipe.push_back(absl::StrCat(spec.name, "/s", spec.stage));
        break;
      case NodeRole::kSdp:
        sdp.push_back(absl::StrCat(spec.name, "[", absl::StrJoin(plan.subnetwork[v], "+"), "]"));
        break;
      case NodeRole::kIdle:
        idle.push_back(spec.name);
        break;
    }
  }
  return absl::StrCat("pipeline: ", pipe.empty() ? "-" : absl::StrJoin(pipe, " "),
                      "; sdp: ", sdp.empty() ? "-" : absl::StrJoin(sdp, " "),
                      "; idle: ", idle.empty() ? "-" : absl::StrJoin(idle, " "));
}

std::string FormatHybridTable(const HybridSwarm& swarm, const HybridInputs& in,
                              const std::vector<HybridRow>& rows) {
  std::string out = absl::StrFormat(
      "hybrid: %d nodes, %d stages, %.0f M parameters, subnetworks of %d stages (routes: %d), "
      "%d MBs per data node or SDP node, %d tokens per MB, averaging H=%d %s, %s memory%s\n",
      static_cast<int>(swarm.nodes.size()), swarm.model.shape.num_stages, in.params / 1e6,
      SdpStages(swarm), swarm.workload.path_length, swarm.workload.mb_per_data_node,
      swarm.model.shape.samples_per_mb * swarm.model.tokens_per_sample,
      static_cast<int>(std::max<int64_t>(1, swarm.averaging.outer_every)),
      model::AvgCodecName(swarm.averaging.codec),
      in.memory_gib > 0 ? absl::StrFormat("%.0f GiB", in.memory_gib) : std::string("unlimited"),
      in.half_one_stage ? " (every second node: one stage only)"
      : in.one_stage_nodes.empty()
          ? ""
          : absl::StrFormat(" (%d named nodes: one stage only)",
                            static_cast<int>(in.one_stage_nodes.size())));
  out += absl::StrFormat("  %-18s %5s %4s %4s %5s %9s %8s %8s %9s %11s %10s %7s\n", "plan", "pipe",
                         "sdp", "idle", "MBs", "pipe s", "sdp s", "avg s", "iter s", "tokens/s",
                         "B/token", "x pipe");
  double base = 0;
  for (const HybridRow& r : rows) {
    if (!r.status.ok()) {
      out += absl::StrFormat("  %-18s not possible: %s\n", r.label, r.status.message());
      continue;
    }
    const HybridPlan& p = r.plan;
    if (base == 0 && r.label == "pipeline-only") base = p.tokens_per_s;
    out += absl::StrFormat(
        "  %-18s %5d %4d %4d %5d %9.2f %8.2f %8.2f %9.2f %11.0f %10.0f %7s\n", r.label,
        Count(p, NodeRole::kPipeline), Count(p, NodeRole::kSdp), Count(p, NodeRole::kIdle),
        p.pipeline_mbs + p.sdp_mbs, p.pipeline_s, p.sdp_s, p.averaging_s, p.iteration_s,
        p.tokens_per_s, p.bytes_per_token,
        base > 0 ? absl::StrFormat("%.2f", p.tokens_per_s / base) : std::string("-"));
  }
  for (const HybridRow& r : rows) {
    if (r.status.ok() && r.label.rfind("mixed", 0) == 0) {
      out += absl::StrCat("  ", r.label, ": ", FormatRoles(swarm, r.plan), "\n");
    }
  }
  return out;
}

}  // namespace skipswarm::scheduler
