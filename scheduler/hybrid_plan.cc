#include "scheduler/hybrid_plan.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "scheduler/evaluator.h"
#include "scheduler/planner.h"

namespace skipswarm::scheduler {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kTrainedBytesPerParam = 16;  // weights, gradients, 2 moments
constexpr double kFrozenBytesPerParam = 4;

int NumStages(const HybridSwarm& s) { return s.model.shape.num_stages; }

double StageParams(const HybridSwarm& s) {
  return NumStages(s) > 0 ? s.model.params / NumStages(s) : 0;
}

double StageGiB(const HybridSwarm& s, double bytes_per_param) {
  return StageParams(s) * bytes_per_param / kGiB;
}

double ForwardSeconds(const HybridSwarm& s, int v) {
  return s.nodes[v].spec.sec_per_layer_sample * s.model.shape.layers_per_stage *
         s.model.shape.samples_per_mb;
}

double LinkBandwidth(const HybridSwarm& s, int u, int v) {
  const size_t n = s.nodes.size();
  if (s.link_bytes_per_s.size() != n * n) return 0;
  return s.link_bytes_per_s[u * n + v];
}

// Averaging of one sync (Note [Hybrid cost]): owners per stage, then each
// node's upload time; fills the plan's averaging fields.
void CostAveragingOf(const HybridSwarm& s, const std::vector<std::vector<int>>& owned,
                     HybridPlan* plan) {
  const int stages = NumStages(s);
  const int n = static_cast<int>(s.nodes.size());
  std::vector<std::vector<int>> owners(stages);
  for (int v = 0; v < n; ++v) {
    for (int st : owned[v]) owners[st].push_back(v);
  }
  plan->stage_owners.assign(stages, 0);
  const double stage_bytes = model::AveragedBytes(s.averaging.codec, StageParams(s));
  double bytes_per_sync = 0;
  double sync_s = 0;
  std::vector<double> to_peer(n);
  for (int v = 0; v < n; ++v) {
    if (owned[v].empty()) continue;
    std::fill(to_peer.begin(), to_peer.end(), 0.0);
    double total = 0;
    for (int st : owned[v]) {
      const int r = static_cast<int>(owners[st].size());
      if (r < 2) continue;
      for (int u : owners[st]) {
        if (u != v) to_peer[u] += 2.0 * stage_bytes / r;  // shard out and back
      }
      total += 2.0 * (r - 1) / r * stage_bytes;
    }
    bytes_per_sync += total;
    double t = s.nodes[v].uplink_bytes_per_s > 0 ? total / s.nodes[v].uplink_bytes_per_s : 0;
    for (int u = 0; u < n; ++u) {
      const double bw = LinkBandwidth(s, v, u);
      if (to_peer[u] > 0 && bw > 0) t = std::max(t, to_peer[u] / bw);
    }
    sync_s = std::max(sync_s, t);
  }
  for (int st = 0; st < stages; ++st) plan->stage_owners[st] = static_cast<int>(owners[st].size());
  const double h = static_cast<double>(std::max<int64_t>(1, s.averaging.outer_every));
  plan->averaging_sync_s = sync_s;
  plan->averaging_s = sync_s / h;
  plan->averaging_bytes = bytes_per_sync / h;
}

// Plans and times the pipeline part; fills pipeline fields and `owned`.
absl::Status CostPipeline(const HybridSwarm& s, const std::vector<NodeRole>& roles,
                          const HybridOptions& options, int evaluations,
                          std::vector<std::vector<int>>* owned, HybridPlan* plan) {
  const int n = static_cast<int>(s.nodes.size());
  for (int v = 0; v < n; ++v) {
    if (roles[v] == NodeRole::kPipeline) plan->pipeline_nodes.push_back(v);
  }
  if (plan->pipeline_nodes.empty()) return absl::OkStatus();
  const int m = static_cast<int>(plan->pipeline_nodes.size());
  absl::StatusOr<TopologyView> view = PipelineView(s, plan->pipeline_nodes);
  if (!view.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("pipeline nodes cannot form a pipeline: ", view.status().message()));
  }
  SS_ASSIGN_OR_RETURN(std::unique_ptr<Planner> planner, CreatePlanner(options.planner));
  PlanRequest request;
  request.view = &*view;
  request.workload = s.workload;
  request.seed = options.seed;
  request.max_evaluations = evaluations;
  request.stall_evaluations = std::max(50, evaluations / 4);
  absl::StatusOr<Plan> routes = planner->MakePlan(request);
  if (!routes.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no route plan for the pipeline nodes: ", routes.status().message()));
  }
  SS_ASSIGN_OR_RETURN(Evaluation eval, Evaluate(*view, *routes));
  if (eval.deadlocked || !std::isfinite(eval.iteration_time_s)) {
    return absl::FailedPreconditionError("the pipeline plan deadlocks");
  }
  plan->pipeline_s = eval.iteration_time_s;
  plan->pipeline_mbs = static_cast<int>(routes->routes.size());
  for (const Route& r : routes->routes) {
    for (size_t h = 0; h + 1 < r.nodes.size(); ++h) {
      if (r.nodes[h] != r.nodes[h + 1]) plan->activation_bytes += 2 * s.model.shape.bytes_per_mb;
    }
  }
  for (int i = 0; i < m; ++i) {
    (*owned)[plan->pipeline_nodes[i]].push_back(view->stage(i));
  }
  plan->pipeline_plan = *std::move(routes);
  return absl::OkStatus();
}

double Tokens(const HybridPlan& p) { return p.tokens_per_s; }

}  // namespace

const char* NodeRoleName(NodeRole role) {
  switch (role) {
    case NodeRole::kPipeline:
      return "pipeline";
    case NodeRole::kSdp:
      return "sdp";
    case NodeRole::kIdle:
      break;
  }
  return "idle";
}

int SdpStages(const HybridSwarm& swarm) {
  const int p = swarm.model.sdp_stages > 0 ? swarm.model.sdp_stages : swarm.workload.path_length;
  return std::clamp(p, std::min(2, NumStages(swarm)), NumStages(swarm));
}

std::vector<std::vector<int>> SdpWindows(int num_stages, int stages_per_worker, int k) {
  std::vector<std::vector<int>> out(k);
  const int middle = num_stages - 2;
  const int take = std::max(0, stages_per_worker - 2);
  for (int c = 0; c < k; ++c) {
    std::vector<int>& sub = out[c];
    sub.push_back(0);
    for (int j = 0; j < take && middle > 0; ++j) sub.push_back(1 + (c * take + j) % middle);
    if (num_stages > 1) sub.push_back(num_stages - 1);
    std::sort(sub.begin(), sub.end());
    sub.erase(std::unique(sub.begin(), sub.end()), sub.end());
  }
  return out;
}

bool FitsSdp(const HybridSwarm& s, int v) {
  const int stages = NumStages(s);
  const int p = SdpStages(s);
  const int held = s.model.backward_masking ? stages : p;
  if (s.nodes[v].max_stages > 0 && s.nodes[v].max_stages < held) return false;
  const double mem = s.nodes[v].memory_gib;
  if (mem <= 0) return true;
  double need = p * StageGiB(s, kTrainedBytesPerParam);
  if (s.model.backward_masking) {
    need += (stages - p) * StageGiB(s, kFrozenBytesPerParam) + stages * s.model.activation_gib;
  } else {
    need += p * s.model.activation_gib;
  }
  return need <= mem;
}

int PipelineSlots(const HybridSwarm& s, int v) {
  const int slots = std::max(0, s.nodes[v].spec.memory_slots);
  const double mem = s.nodes[v].memory_gib;
  if (mem <= 0) return slots;
  const double free_gib = mem - StageGiB(s, kTrainedBytesPerParam);
  if (free_gib < 0) return 0;
  if (s.model.activation_gib <= 0) return slots;
  return std::min(slots, static_cast<int>(std::floor(free_gib / s.model.activation_gib)));
}

double SdpMicroBatchSeconds(const HybridSwarm& s, int v) {
  const double c = ForwardSeconds(s, v);
  const int stages = NumStages(s);
  const int p = SdpStages(s);
  if (!s.model.backward_masking) return (2.5 * p + 0.25) * c;
  return (stages + 1.5 * p + 0.75 * (stages - p) + 0.25) * c;
}

absl::StatusOr<TopologyView> PipelineView(const HybridSwarm& s, const std::vector<int>& nodes) {
  const size_t n = s.nodes.size();
  const size_t m = nodes.size();
  std::vector<NodeSpec> specs;
  std::vector<double> hops(m * m);
  for (size_t i = 0; i < m; ++i) {
    NodeSpec spec = s.nodes[nodes[i]].spec;
    spec.memory_slots = PipelineSlots(s, nodes[i]);
    specs.push_back(spec);
    for (size_t j = 0; j < m; ++j) hops[i * m + j] = s.hop_s[nodes[i] * n + nodes[j]];
  }
  return TopologyView::Create(s.model.shape, std::move(specs), std::move(hops));
}

namespace {

absl::StatusOr<HybridPlan> CostRolesWith(const HybridSwarm& s, const std::vector<NodeRole>& roles,
                                         const HybridOptions& options, int evaluations) {
  const int n = static_cast<int>(s.nodes.size());
  if (static_cast<int>(roles.size()) != n) return absl::InvalidArgumentError("one role per node");
  if (s.hop_s.size() != static_cast<size_t>(n) * n) {
    return absl::InvalidArgumentError("hop_s must be n x n");
  }
  HybridPlan plan;
  plan.roles = roles;
  plan.subnetwork.assign(n, {});
  std::vector<std::vector<int>> owned(n);
  SS_RETURN_IF_ERROR(CostPipeline(s, roles, options, evaluations, &owned, &plan));
  std::vector<int> sdp;
  for (int v = 0; v < n; ++v) {
    if (roles[v] != NodeRole::kSdp) continue;
    if (!FitsSdp(s, v)) {
      return absl::FailedPreconditionError(
          absl::StrCat(s.nodes[v].spec.name, " cannot hold a subnetwork"));
    }
    sdp.push_back(v);
  }
  if (plan.pipeline_nodes.empty() && sdp.empty()) {
    return absl::FailedPreconditionError("no node trains");
  }
  const std::vector<std::vector<int>> windows =
      SdpWindows(NumStages(s), SdpStages(s), static_cast<int>(sdp.size()));
  const int m = s.workload.mb_per_data_node;
  for (size_t i = 0; i < sdp.size(); ++i) {
    const int v = sdp[i];
    plan.subnetwork[v] = windows[i];
    owned[v] = windows[i];
    plan.sdp_s = std::max(plan.sdp_s, m * SdpMicroBatchSeconds(s, v));
    plan.sdp_mbs += m;
  }
  CostAveragingOf(s, owned, &plan);
  plan.iteration_s = std::max(plan.pipeline_s, plan.sdp_s) + plan.averaging_s;
  plan.tokens_per_iteration = static_cast<double>(plan.pipeline_mbs + plan.sdp_mbs) *
                              s.model.shape.samples_per_mb * s.model.tokens_per_sample;
  if (plan.iteration_s > 0) plan.tokens_per_s = plan.tokens_per_iteration / plan.iteration_s;
  if (plan.tokens_per_iteration > 0) {
    plan.bytes_per_token =
        (plan.activation_bytes + plan.averaging_bytes) / plan.tokens_per_iteration;
  }
  return plan;
}

}  // namespace

absl::StatusOr<HybridPlan> CostRoles(const HybridSwarm& swarm, const std::vector<NodeRole>& roles,
                                     const HybridOptions& options) {
  return CostRolesWith(swarm, roles, options, options.final_evaluations);
}

namespace {

std::vector<NodeRole> PipelineRoles(const HybridSwarm& s) {
  std::vector<NodeRole> roles(s.nodes.size(), NodeRole::kIdle);
  for (size_t v = 0; v < s.nodes.size(); ++v) {
    if (PipelineSlots(s, static_cast<int>(v)) > 0) roles[v] = NodeRole::kPipeline;
  }
  return roles;
}

std::vector<NodeRole> SdpRoles(const HybridSwarm& s) {
  std::vector<NodeRole> roles(s.nodes.size(), NodeRole::kIdle);
  for (size_t v = 0; v < s.nodes.size(); ++v) {
    if (FitsSdp(s, static_cast<int>(v))) roles[v] = NodeRole::kSdp;
  }
  return roles;
}

bool CanTake(const HybridSwarm& s, int v, NodeRole role) {
  switch (role) {
    case NodeRole::kPipeline:
      return PipelineSlots(s, v) > 0;
    case NodeRole::kSdp:
      return FitsSdp(s, v);
    case NodeRole::kIdle:
      break;
  }
  return true;
}

// Single-node moves from `start` while one raises tokens/s by min_gain.
absl::StatusOr<HybridPlan> ImproveByMoves(const HybridSwarm& s, const HybridOptions& options,
                                          HybridPlan best) {
  const int n = static_cast<int>(s.nodes.size());
  const NodeRole kRoles[] = {NodeRole::kPipeline, NodeRole::kSdp, NodeRole::kIdle};
  for (int move = 0; move < options.max_moves; ++move) {
    std::optional<HybridPlan> improved;
    for (int v = 0; v < n; ++v) {
      for (NodeRole role : kRoles) {
        if (role == best.roles[v] || !CanTake(s, v, role)) continue;
        std::vector<NodeRole> roles = best.roles;
        roles[v] = role;
        absl::StatusOr<HybridPlan> c = CostRolesWith(s, roles, options, options.max_evaluations);
        if (!c.ok()) continue;
        const double bar = improved ? Tokens(*improved) : Tokens(best) * (1 + options.min_gain);
        if (Tokens(*c) > bar) improved = *std::move(c);
      }
    }
    if (!improved) break;
    best = *std::move(improved);
  }
  return best;
}

}  // namespace

absl::StatusOr<HybridPlan> AllocateHybrid(const HybridSwarm& s, const HybridOptions& options) {
  if (options.mode == HybridMode::kPipelineOnly) return CostRoles(s, PipelineRoles(s), options);
  if (options.mode == HybridMode::kSdpOnly) {
    const std::vector<NodeRole> roles = SdpRoles(s);
    if (std::count(roles.begin(), roles.end(), NodeRole::kSdp) == 0) {
      return absl::FailedPreconditionError("no node can hold a subnetwork");
    }
    return CostRoles(s, roles, options);
  }
  // Mixed (Note [Hybrid cost]): single-node moves from three starts, the two
  // pure plans and "SDP where it fits, pipeline elsewhere" (from the pure
  // ones alone a mix needing several nodes to move at once, a whole
  // pipeline, is out of reach).
  std::vector<NodeRole> split = PipelineRoles(s);
  for (size_t v = 0; v < split.size(); ++v) {
    if (FitsSdp(s, static_cast<int>(v))) split[v] = NodeRole::kSdp;
  }
  absl::StatusOr<HybridPlan> best = absl::FailedPreconditionError("no node trains");
  for (const std::vector<NodeRole>& start : {PipelineRoles(s), SdpRoles(s), split}) {
    absl::StatusOr<HybridPlan> c = CostRolesWith(s, start, options, options.max_evaluations);
    if (!c.ok()) continue;
    c = ImproveByMoves(s, options, *std::move(c));
    if (c.ok() && (!best.ok() || Tokens(*c) > Tokens(*best))) best = std::move(c);
  }
  if (!best.ok()) return best.status();
  // The final figures with the full planner effort, against both pure plans
  // at the same effort, so the mixed plan is never worse than either.
  absl::StatusOr<HybridPlan> result = CostRoles(s, best->roles, options);
  if (!result.ok() || Tokens(*result) < Tokens(*best)) result = *std::move(best);
  for (const std::vector<NodeRole>& pure : {PipelineRoles(s), SdpRoles(s)}) {
    absl::StatusOr<HybridPlan> p = CostRoles(s, pure, options);
    if (p.ok() && Tokens(*p) > Tokens(*result)) result = *std::move(p);
  }
  return result;
}

}  // namespace skipswarm::scheduler
