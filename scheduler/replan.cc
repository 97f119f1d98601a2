#include "scheduler/replan.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "scheduler/route_search.h"

namespace skipswarm::scheduler {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Nodes per stage an in-flight completion considers (the cheapest for the
// origin): keeps a 1,000-node re-route well under a millisecond.
constexpr int kCandidates = 8;

// Cost of putting replica x between prev and next, given how many routes
// already use x relative to its stage's average.
double ReplacementCost(const TopologyView& view, int prev, int x, int next,
                       const std::vector<int>& use, double mean_use) {
  const double d = view.hop_s(prev, x) + view.hop_s(x, next);
  if (!std::isfinite(d)) return kInf;
  const double load =
      mean_use > 0 ? use[x] / mean_use : 0;  // 1 = an average replica
  return 2 * d + 2.5 * view.forward_s(x) * (1 + load);
}

}  // namespace

absl::StatusOr<ReplanResult> ReplanWithoutNode(const TopologyView& view,
                                               const Workload& workload,
                                               const Plan& plan, int dead) {
  if (dead < 0 || dead >= view.num_nodes()) {
    return absl::InvalidArgumentError(absl::StrCat("no node with index ", dead));
  }
  ReplanResult result;
  const int stage = view.stage(dead);
  const bool last_of_stage =
      view.alive(dead) && view.stage_nodes(stage).size() == 1;
  if (last_of_stage && stage == 0) {
    return absl::FailedPreconditionError("the last data node died");
  }
  if (!view.alive(dead)) {
    result.view = view;
  } else if (last_of_stage) {
    // Keep the node "alive" in the view but never route through it: the
    // stage is skipped below.
    result.view = view;
  } else {
    absl::StatusOr<TopologyView> less = view.WithoutNode(dead);
    if (!less.ok()) return less.status();
    result.view = *std::move(less);
  }
  std::vector<int> use(view.num_nodes(), 0);
  for (const Route& r : plan.routes) {
    for (size_t h = 1; h + 1 < r.nodes.size(); ++h) ++use[r.nodes[h]];
  }
  for (const Route& r : plan.routes) {
    if (r.origin == dead) {
      result.dropped.push_back(r.mb);
      continue;
    }
    Route fixed = r;
    bool changed = false;
    for (size_t h = 1; h + 1 < fixed.nodes.size(); ++h) {
      if (fixed.nodes[h] != dead) continue;
      const int prev = fixed.nodes[h - 1];
      const int next = fixed.nodes[h + 1];
      const std::vector<int>& replicas = result.view.stage_nodes(stage);
      double mean_use = 0;
      for (int x : replicas) mean_use += use[x];
      if (!replicas.empty()) mean_use /= replicas.size();
      int best = -1;
      double best_cost = kInf;
      for (int x : replicas) {
        if (x == dead) continue;
        const double c = ReplacementCost(view, prev, x, next, use, mean_use);
        if (c < best_cost) {
          best_cost = c;
          best = x;
        }
      }
      if (best >= 0) {
        fixed.nodes[h] = best;
        --use[dead];
        ++use[best];
      } else {
        fixed.nodes.erase(fixed.nodes.begin() + h);  // skip the stage
        if (!StagesObeyRules(RouteStages(view, fixed), workload.max_swaps,
                             workload.max_jump) ||
            fixed.nodes.size() < 3 ||
            !std::isfinite(view.hop_s(prev, fixed.nodes[h]))) {
          return absl::FailedPreconditionError(absl::StrCat(
              "mb ", r.mb, " cannot skip stage ", stage, " (its last node '",
              view.node(dead).name, "' died) within the route rules"));
        }
      }
      changed = true;
      break;  // a route visits each node once
    }
    if (changed) result.rerouted.push_back(r.mb);
    result.plan.routes.push_back(std::move(fixed));
  }
  result.plan.planner = plan.planner;
  return result;
}

absl::StatusOr<Route> RerouteInFlight(const TopologyView& view,
                                      const Workload& workload,
                                      const Route& route, int hop, int dead) {
  const int p = static_cast<int>(route.nodes.size()) - 1;
  if (hop < 0 || hop >= p) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hop ", hop, " is not a forward hop of a route of length ", p));
  }
  if (route.nodes[hop + 1] != dead) {
    return absl::InvalidArgumentError(
        absl::StrCat("node ", dead, " is not the next hop after ", hop));
  }
  if (dead == route.origin) {
    return absl::AbortedError(
        "the origin died: its micro-batch is lost and must restart");
  }
  const std::vector<int> prefix(route.nodes.begin(),
                                route.nodes.begin() + hop + 1);
  std::vector<int> best_nodes;
  double best = kInf;
  // (a) Another replica of the same stage, rest unchanged.
  const int next = route.nodes[hop + 2];
  for (int x : view.stage_nodes(view.stage(dead))) {
    if (x == dead || !view.alive(x)) continue;
    std::vector<int> nodes = route.nodes;
    nodes[hop + 1] = x;
    if (!std::isfinite(view.hop_s(route.nodes[hop], x)) ||
        !std::isfinite(view.hop_s(x, next))) {
      continue;
    }
    const double latency = RouteLatency(view, nodes);
    if (latency < best) {
      best = latency;
      best_nodes = std::move(nodes);
    }
  }
  // (b) The best completion from here, same length, then one stage fewer.
  Workload rules = workload;
  std::vector<double> penalty(view.num_nodes(), 0);
  penalty[dead] = kInf;
  for (int v = 0; v < view.num_nodes(); ++v) {
    if (!view.alive(v)) penalty[v] = kInf;
  }
  RouteSearcher searcher(view, rules);
  for (int length : {p, p - 1}) {
    if (length < hop + 1 || length < 2) continue;
    RouteSearcher::Query q;
    q.node_penalty = &penalty;
    q.path_length = length;
    q.max_candidates = kCandidates;
    std::optional<FoundRoute> found = searcher.BestCompletion(prefix, q);
    if (found && (length == p ? found->latency_s < best : best_nodes.empty())) {
      best = found->latency_s;
      best_nodes = found->nodes;
    }
    if (!best_nodes.empty()) break;
  }
  if (best_nodes.empty()) {
    return absl::AbortedError(absl::StrCat(
        "no live route completes mb ", route.mb, " from hop ", hop));
  }
  Route fixed = route;
  fixed.nodes = std::move(best_nodes);
  return fixed;
}

}  // namespace skipswarm::scheduler
