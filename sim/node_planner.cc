#include "sim/node_planner.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "scheduler/evaluator.h"
#include "scheduler/replan.h"
#include "scheduler/route_search.h"

namespace skipswarm::sim {

PlanBoard::PlanBoard(const SimScenario* scenario, NodeWorld* world, const SimOptions& options,
                     std::string planner)
    : sc_(scenario), world_(world), options_(options), planner_name_(std::move(planner)) {}

absl::StatusOr<const BoardPlan*> PlanBoard::PlanFor(const std::vector<int>& members,
                                                    bool* fresh) {
  *fresh = false;
  std::string key, conditions;
  for (int u : members) absl::StrAppend(&key, u, ",");
  for (int u = 0; u < world_->size(); ++u) {
    if (world_->node(u).speed != 1) absl::StrAppend(&conditions, u, "x", world_->node(u).speed, ",");
  }
  for (const auto& p : world_->partitions()) {
    absl::StrAppend(&conditions, "|", absl::StrJoin(p, ","));
  }
  key += "/" + conditions;
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second.get();
  SS_ASSIGN_OR_RETURN(BoardPlan plan, Compute(members, conditions));
  *fresh = true;
  auto& slot = cache_[key];
  slot = std::make_unique<BoardPlan>(std::move(plan));
  last_ = slot.get();
  last_conditions_ = conditions;
  return slot.get();
}

// As sim/driver.h's incremental mode: the scheduler's ReplanWithoutNode for
// each departed member on the old plan, then the plan moved to the new view;
// a route still on a departed node (the scheduler could not repair it) is
// searched again from its origin, and routes of departed origins go.
absl::StatusOr<scheduler::Plan> PlanBoard::Incremental(const BoardPlan& old,
                                                       const BoardPlan& now) const {
  std::vector<int> inverse(sc_->universe.view.num_nodes(), -1);
  for (size_t i = 0; i < now.members.size(); ++i) inverse[now.members[i]] = static_cast<int>(i);
  for (int u : now.members) {
    if (!std::binary_search(old.members.begin(), old.members.end(), u)) {
      return absl::FailedPreconditionError("a member joined: full re-plan");
    }
  }
  scheduler::TopologyView view = old.view;
  scheduler::Plan plan = old.plan;
  for (int i = 0; i < view.num_nodes(); ++i) {
    if (inverse[old.members[i]] >= 0) continue;
    SS_ASSIGN_OR_RETURN(scheduler::ReplanResult r, scheduler::ReplanWithoutNode(
                                                       view, sc_->universe.workload, plan, i));
    view = std::move(r.view);
    plan = std::move(r.plan);
  }
  scheduler::RouteSearcher searcher(now.view, sc_->universe.workload);
  std::vector<scheduler::Route> kept;
  for (scheduler::Route& r : plan.routes) {
    for (int& v : r.nodes) v = inverse[old.members[v]];
    r.origin = r.nodes.front();
    if (r.origin < 0) continue;
    if (std::count(r.nodes.begin(), r.nodes.end(), -1)) {
      scheduler::RouteSearcher::Query q;
      q.path_length = static_cast<int>(r.nodes.size()) - 1;
      std::optional<scheduler::FoundRoute> found = searcher.Best(r.origin, q);
      if (!found) continue;
      r.nodes = found->nodes;
    }
    kept.push_back(r);
  }
  plan.routes = std::move(kept);
  return plan;
}

absl::StatusOr<BoardPlan> PlanBoard::Compute(const std::vector<int>& members,
                                             const std::string& conditions) {
  if (planner_ == nullptr) {
    SS_ASSIGN_OR_RETURN(planner_, scheduler::CreatePlanner(planner_name_));
  }
  const scheduler::TopologyView& u = sc_->universe.view;
  const int n = static_cast<int>(members.size());
  std::vector<scheduler::NodeSpec> specs;
  std::vector<double> hops(static_cast<size_t>(n) * n, scheduler::kNoLink);
  for (int i = 0; i < n; ++i) {
    scheduler::NodeSpec spec = u.node(members[i]);
    spec.stage = world_->node(members[i]).stage;  // a joiner's is chosen late
    spec.sec_per_layer_sample *= world_->node(members[i]).speed;  // measured
    specs.push_back(spec);
    for (int j = 0; j < n; ++j) {
      if (i == j) {
        hops[i * n + j] = 0;
      } else if (world_->LinkUp(members[i], members[j])) {
        hops[i * n + j] = u.hop_s(members[i], members[j]);
      }
    }
  }
  BoardPlan out;
  out.members = members;
  SS_ASSIGN_OR_RETURN(out.view,
                      scheduler::TopologyView::Create(u.model(), std::move(specs), std::move(hops)));
  if (options_.replan == "incremental" && last_ != nullptr && conditions == last_conditions_) {
    absl::StatusOr<scheduler::Plan> kept = Incremental(*last_, out);
    if (kept.ok()) {
      ++plans_;
      out.plan = *std::move(kept);
      out.planned_s = scheduler::EvaluateTime(out.view, out.plan, nullptr);
      return out;
    }
  }
  scheduler::PlanRequest req;
  req.view = &out.view;
  req.workload = sc_->universe.workload;
  req.seed = sc_->seed;
  req.max_evaluations = options_.max_evaluations;
  req.stall_evaluations = options_.stall_evaluations;
  req.candidates_per_stage = options_.candidates_per_stage;
  // Routes given from outside are in universe indices: usable while every
  // node of the universe is a member.
  absl::StatusOr<scheduler::Plan> replay = absl::NotFoundError("no routes");
  if (planner_->name() == "replay") {
    if (n != u.num_nodes()) return absl::UnavailableError("replay needs the whole swarm alive");
    replay = sc_->universe.RouteSet(sc_->replay_key);
    if (!replay.ok()) return replay.status();
    req.replay = &*replay;
  }
  ++plans_;
  const absl::Duration t0 =
      options_.wall_clock ? options_.wall_clock->SteadyNow() : absl::ZeroDuration();
  absl::StatusOr<scheduler::Plan> plan = planner_->MakePlan(req);
  // As sim/driver.h: a depleted swarm trains on with a looser balance rule.
  for (double tol = std::max(0.1, 2 * req.workload.balance_tolerance); !plan.ok() && tol <= 8;
       tol *= 2) {
    req.workload.balance_tolerance = tol;
    plan = planner_->MakePlan(req);
    out.balance_relaxed = plan.ok();
    out.tolerance = tol;
  }
  if (options_.wall_clock) {
    planning_wall_ms_ += absl::ToDoubleMilliseconds(options_.wall_clock->SteadyNow() - t0);
  }
  if (!plan.ok()) return plan.status();
  out.plan = *std::move(plan);
  out.planned_s = scheduler::EvaluateTime(out.view, out.plan, nullptr);
  return out;
}

absl::StatusOr<std::vector<node::PlannedRoute>> BoardRoutePlanner::Plan(
    const node::PlanInput& input, const node::SwarmView& view) {
  const std::vector<node::PeerInfo> peers = view.Members();
  std::vector<int> members;
  const scheduler::TopologyView& u = board_->universe();
  for (const node::PeerInfo& m : peers) {
    const int v = board_->world().Find(m.id);
    if (v >= 0 && view.IsAlive(m.id)) members.push_back(v);
  }
  std::sort(members.begin(), members.end());
  bool fresh = false;
  SS_ASSIGN_OR_RETURN(const BoardPlan* bp, board_->PlanFor(members, &fresh));
  const int self = board_->world().Find(input.self);
  std::vector<node::PlannedRoute> out;
  for (const scheduler::Route& r : bp->plan.routes) {
    if (bp->members[r.origin] != self) continue;
    node::PlannedRoute pr;
    pr.index = static_cast<int>(out.size());
    pr.priority = r.priority;  // served in plan order (Note [Queue order])
    for (size_t h = 0; h + 1 < r.nodes.size(); ++h) {
      const int v = bp->members[r.nodes[h]];
      pr.hops.push_back({u.node(v).id, bp->view.stage(r.nodes[h])});
    }
    out.push_back(std::move(pr));
  }
  // Every route the plan gives this origin, which may be more or fewer than
  // input.mbs: the pipeline planner spreads all D x M MBs over its
  // pipelines' data nodes only.
  board_->Handed(input.iteration, self, static_cast<int>(out.size()), *bp, fresh);
  return out;
}

}  // namespace skipswarm::sim
