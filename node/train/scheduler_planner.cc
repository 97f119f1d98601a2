#include "node/train/scheduler_planner.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "scheduler/topology.h"

namespace skipswarm::node {

absl::StatusOr<std::unique_ptr<SchedulerPlanner>> SchedulerPlanner::Create(
    const SchedulerPlannerOptions& options) {
  absl::StatusOr<std::unique_ptr<scheduler::Planner>> p =
      scheduler::CreatePlanner(options.planner);
  if (!p.ok()) return p.status();
  return std::unique_ptr<SchedulerPlanner>(new SchedulerPlanner(options, *std::move(p)));
}

absl::StatusOr<std::vector<PlannedRoute>> SchedulerPlanner::Plan(const PlanInput& input,
                                                                 const SwarmView& view) {
  const std::vector<PeerInfo> members = view.Members();
  std::vector<scheduler::NodeSpec> nodes;
  for (const PeerInfo& m : members) {
    if (m.stages.size() != 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          "planner '", options_.planner, "' needs one stage per node; ", m.id.ShortString(),
          " hosts ", m.stages.size()));
    }
    scheduler::NodeSpec n;
    n.name = m.id.ShortString();
    n.id = m.id;
    n.stage = m.stages[0];
    n.sec_per_layer_sample = options_.sec_per_layer_sample;
    n.memory_slots = m.memory_slots;
    nodes.push_back(n);
  }
  scheduler::ModelShape shape;
  shape.num_stages = input.num_stages;
  shape.layers_per_stage = options_.layers_per_stage;
  shape.samples_per_mb = options_.samples_per_mb;
  const size_t n = nodes.size();
  std::vector<double> hops(n * n, options_.hop_s);
  absl::StatusOr<scheduler::TopologyView> topo =
      scheduler::TopologyView::Create(shape, nodes, hops);
  if (!topo.ok()) return topo.status();
  for (size_t v = 0; v < n; ++v) {
    if (view.IsAlive(members[v].id)) continue;
    absl::StatusOr<scheduler::TopologyView> without = topo->WithoutNode(static_cast<int>(v));
    if (!without.ok()) return absl::UnavailableError(without.status().message());
    topo = *std::move(without);
  }
  scheduler::PlanRequest request;
  request.view = &*topo;
  request.workload.mb_per_data_node = input.mbs;
  request.workload.path_length =
      options_.path_length > 0 ? options_.path_length : input.num_stages;
  // Same seed on every data node for the same iteration: the same plan.
  request.seed = options_.seed * 1000003 + input.iteration;
  request.clock = nullptr;  // no time budget: deterministic
  absl::StatusOr<scheduler::Plan> plan = planner_->MakePlan(request);
  if (!plan.ok()) return plan.status();

  // Global slots in plan order (origin by id, then mb), so data order is
  // disjoint across data nodes (Note [Data order]).
  std::map<std::pair<common::NodeId, int>, const scheduler::Route*> ordered;
  for (const scheduler::Route& r : plan->routes) {
    ordered[{topo->node(r.origin).id, r.mb}] = &r;
  }
  std::vector<PlannedRoute> out;
  int slot = 0;
  for (const auto& [key, r] : ordered) {
    if (key.first == input.self) {
      PlannedRoute pr;
      pr.index = static_cast<int>(out.size());
      pr.data_slot = slot;
      pr.priority = r->priority;
      for (size_t i = 0; i + 1 < r->nodes.size(); ++i) {
        pr.hops.push_back({topo->node(r->nodes[i]).id, topo->stage(r->nodes[i])});
      }
      out.push_back(std::move(pr));
    }
    ++slot;
  }
  return out;
}

}  // namespace skipswarm::node
