#include "node/train/scheduler_planner.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "scheduler/topology.h"

namespace skipswarm::node {

// Note [Full routes stay in order]
// The skippipe search allows swaps (Workload::max_swaps, 2 adjacent swaps by
// default) at any path length, and at P = S it uses them: on the default
// `skipswarm local` layout (2 data nodes x 4 MBs, stages 1-5 x 2 replicas,
// uniform costs; `plan_tool plan --show_routes`, seeds 1-3) every route is
// in order while all 12 nodes live, but with one replica of stage 2 dead, as
// after a --kill, 6 of the 8 routes swap (0,1,3,2,4,5, 0,2,1,3,4,5, ...)
// to keep MBs off the lone replica at the same moment; with two stages down
// to one replica and 8 MBs per data node, 4-7 of 16.
// A swapped full route is a different network: stage 3's blocks read stage
// 1's output and stage 2's read stage 3's. Evaluation, checkpoints and
// inference run the stages in order (model/evaluate.h, `skipswarm eval`),
// and train-ref's routes are in order, so each swapped micro-batch trains
// the weights on a composition the evaluated model never computes: noise in
// the gradient, not a sample of the target. With uniform cost estimates a
// swap cannot shorten a route either (the same nodes cost the same in any
// order); it only moves queueing around.
// So at full length the daemons' planner keeps routes in order (max_swaps
// 0: the scheduler's `noskip`, the same search) and still chooses, per
// micro-batch, the replicas (load, memory slots, collisions, dead members
// left out), the priorities and the injection times. Swaps stay what
// DESIGN.md §1 makes them, a tool of skip routes (path_length < S): there
// the model trains on varying sub-networks anyway, the route rides in the
// record, and train-ref replays swapped routes as given
// (LocalPipeline::TrainMicroBatch takes any valid order).

absl::StatusOr<std::unique_ptr<SchedulerPlanner>> SchedulerPlanner::Create(
    const SchedulerPlannerOptions& options) {
  absl::StatusOr<std::unique_ptr<scheduler::Planner>> p =
      scheduler::CreatePlanner(options.planner);
  if (!p.ok()) return p.status();
  return std::unique_ptr<SchedulerPlanner>(new SchedulerPlanner(options, *std::move(p)));
}

absl::StatusOr<std::vector<PlannedRoute>> SchedulerPlanner::Plan(const PlanInput& input,
                                                                 const SwarmView& view) {
  const bool full_routes =
      options_.path_length <= 0 || options_.path_length >= input.num_stages;
  const std::vector<PeerInfo> members = view.Members();
  std::vector<scheduler::NodeSpec> nodes;
  for (const PeerInfo& m : members) {
    if (m.stages.size() != 1 && full_routes && options_.planner == "skippipe") {
      return in_order_.Plan(input, view);  // outside the scheduler's model
    }
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
  request.workload.path_length = full_routes ? input.num_stages : options_.path_length;
  // Note [Full routes stay in order].
  request.workload.max_swaps = full_routes ? 0 : options_.max_swaps;
  request.workload.max_jump = options_.max_jump;
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
