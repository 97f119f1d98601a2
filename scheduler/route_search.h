// Exact cheapest-route search under the route rules (route.h, Note [Route
// invariants]). Used for the evaluator's lower bound, by the planners and
// for re-routing.
//
// A valid stage sequence is an increasing sequence of "blocks", each either
// one stage t or a swapped pair (t+1, t); at most max_swaps pairs; every
// upward step advances <= max_jump stages. The search is a dynamic program
// over states (hops done k, swaps used w, mode m, node v), with m = 0
// (current stage is the highest so far), 1 (at t+1 of a pair: must go down
// to t next) or 2 (at t after a pair: the highest stage is t+1). The DAG is
// layered by k, so one pass over the layers finds the optimum.
//
// Cost of a route o, v1..v_{P-1}, o:
//   RouteLatency (2.5 c_o + 0.25 c_o + sum_{v != o} 2.5 c_v + 2 sum d(edges),
//   the contention-free latency of docs/DESIGN.md §5) + sum_{v != o} penalty_v.
//
//   RouteSearcher searcher(view, workload);
//   RouteSearcher::Query q;                 // no penalties: fastest route
//   std::optional<FoundRoute> r = searcher.Best(origin, q);
//
// Cost per query: O(P x (max_swaps+1) x C x (max_jump x C)) where C is the
// number of candidate nodes per stage (all alive nodes, or the
// `max_candidates` nearest to the origin).
// Thread rule: a RouteSearcher holds scratch space; one thread at a time.
#ifndef SKIPSWARM_SCHEDULER_ROUTE_SEARCH_H_
#define SKIPSWARM_SCHEDULER_ROUTE_SEARCH_H_

#include <optional>
#include <vector>

#include "scheduler/route.h"
#include "scheduler/topology.h"

namespace skipswarm::scheduler {

// Contention-free latency of one MB on the cycle `nodes` (origin first and
// last): sum 2.5 c_v + 0.25 c_o + 2 sum d(edges).
double RouteLatency(const TopologyView& view, const std::vector<int>& nodes);

struct FoundRoute {
  std::vector<int> nodes;  // the whole cycle, origin first and last
  double latency_s = 0;    // RouteLatency(nodes)
  double cost = 0;         // latency + penalties of the visited nodes
};

class RouteSearcher {
 public:
  // `view` must outlive the searcher.
  RouteSearcher(const TopologyView& view, const Workload& workload);

  struct Query {
    // Seconds added for visiting node v (size num_nodes, or empty = none).
    // +infinity bans the node.
    const std::vector<double>* node_penalty = nullptr;
    // Stages that may be visited (size num_stages, or empty = all).
    const std::vector<bool>* stage_allowed = nullptr;
    // Consider only this many nodes per stage, the cheapest for the origin
    // (2 d(o,v) + 2.5 c_v + penalty). 0 = all. Speed knob for big swarms.
    int max_candidates = 0;
    // Overrides workload.path_length when > 0.
    int path_length = 0;
    // Overrides workload.max_swaps when >= 0 (noskip uses 0).
    int max_swaps = -1;
  };
  std::optional<FoundRoute> Best(int origin, const Query& query);

  // Best completion of a route whose first `prefix.size()` nodes are fixed
  // (prefix[0] = origin); returns the whole cycle. Used when the next hop of
  // an in-flight MB died: the prefix is what it has already visited.
  std::optional<FoundRoute> BestCompletion(const std::vector<int>& prefix,
                                           const Query& query);

 private:
  struct Start {
    int k;       // non-zero stages visited
    int swaps;   // swaps used
    int mode;    // 0, 1, 2 (see above)
    int node;
    double cost;
  };
  std::optional<FoundRoute> Run(int origin, const std::vector<Start>& starts,
                                const std::vector<int>& prefix,
                                const Query& query);
  int Index(int k, int w, int m, int v) const {
    return ((k * (max_swaps_ + 1) + w) * 3 + m) * n_ + v;
  }

  const TopologyView& view_;
  Workload workload_;
  int n_;
  int max_swaps_ = 0;
  std::vector<double> cost_;
  std::vector<int> parent_;
  std::vector<std::vector<int>> candidates_;
  std::vector<int> active_;
  std::vector<bool> visited_stage_;
};

}  // namespace skipswarm::scheduler

#endif  // SKIPSWARM_SCHEDULER_ROUTE_SEARCH_H_
