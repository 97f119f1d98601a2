#include "sim/node_planning.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace skipswarm::sim {

node::PlanningCosts ScenarioCosts(NodeWorld* world) {
  const scheduler::TopologyView& u = world->universe();
  node::PlanningCosts c;
  c.layers_per_stage = u.model().layers_per_stage;
  c.samples_per_mb = u.model().samples_per_mb;
  c.bytes_per_mb = u.model().bytes_per_mb;
  c.sec_per_layer_sample_of = [world](const common::NodeId& id) {
    const int v = world->Find(id);
    return world->universe().node(v).sec_per_layer_sample * world->node(v).speed;
  };
  c.hop_s_of = [world](const common::NodeId& a, const common::NodeId& b) {
    const int x = world->Find(a), y = world->Find(b);
    return world->LinkUp(x, y) ? world->universe().hop_s(x, y) : scheduler::kNoLink;
  };
  return c;
}

std::function<std::string()> WorldCostsKey(const NodeWorld* world) {
  return [world] {
    std::string key;
    for (int u = 0; u < world->size(); ++u) {
      if (world->node(u).speed != 1) absl::StrAppend(&key, u, "x", world->node(u).speed, ",");
    }
    for (const auto& p : world->partitions()) absl::StrAppend(&key, "|", absl::StrJoin(p, ","));
    return key;
  };
}

std::string SimPlannerName(const SimScenario& scenario, const SimOptions& options) {
  return options.planner.empty() ? scenario.planner : options.planner;
}

node::SchedulerPlannerOptions SimPlannerOptions(const SimScenario& sc, const SimOptions& options,
                                                NodeWorld* world, node::PlanCache* cache) {
  const scheduler::Workload& w = sc.universe.workload;
  node::SchedulerPlannerOptions o;
  o.planner = SimPlannerName(sc, options);
  o.path_length = w.path_length;
  o.max_swaps = w.max_swaps;
  o.max_jump = w.max_jump;
  o.balance_tolerance = w.balance_tolerance;
  o.costs = ScenarioCosts(world);
  o.seed = sc.seed;
  o.seed_per_iteration = false;
  o.max_evaluations = options.max_evaluations;
  o.stall_evaluations = options.stall_evaluations;
  o.candidates_per_stage = options.candidates_per_stage;
  o.cache = cache;
  o.incremental = options.replan == "incremental";
  // The scenario's routes name universe nodes: usable while all are members.
  const SimScenario* scenario = &sc;
  o.replay = [scenario, world](const std::vector<node::PeerInfo>& members)
      -> absl::StatusOr<scheduler::Plan> {
    const int n = scenario->universe.view.num_nodes();
    if (static_cast<int>(members.size()) != n) {
      return absl::UnavailableError("replay needs the whole swarm alive");
    }
    std::vector<int> index(n, -1);
    for (int i = 0; i < n; ++i) index[world->Find(members[i].id)] = i;
    absl::StatusOr<scheduler::Plan> plan = scenario->universe.RouteSet(scenario->replay_key);
    if (!plan.ok()) return plan.status();
    for (scheduler::Route& r : plan->routes) {
      for (int& v : r.nodes) v = index[v];
      r.origin = r.nodes.front();
    }
    return plan;
  };
  return o;
}

node::SchedulerRepairerOptions SimRepairerOptions(const SimScenario& sc, NodeWorld* world) {
  node::SchedulerRepairerOptions ro;
  ro.costs = ScenarioCosts(world);
  ro.max_swaps = sc.universe.workload.max_swaps;
  ro.max_jump = sc.universe.workload.max_jump;
  return ro;
}

}  // namespace skipswarm::sim
