#include "scheduler/route_search.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace skipswarm::scheduler {
namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kStartMarker = -2;
}  // namespace

double RouteLatency(const TopologyView& view, const std::vector<int>& nodes) {
  if (nodes.size() < 2) return 0;
  double total = 0.25 * view.forward_s(nodes.front());
  for (size_t i = 0; i + 1 < nodes.size(); ++i) {
    total += 2.5 * view.forward_s(nodes[i]) +
             2 * view.hop_s(nodes[i], nodes[i + 1]);
  }
  return total;
}

RouteSearcher::RouteSearcher(const TopologyView& view, const Workload& workload)
    : view_(view), workload_(workload), n_(view.num_nodes()) {}

std::optional<FoundRoute> RouteSearcher::Best(int origin, const Query& query) {
  return Run(origin, {{0, 0, 0, origin, 0.0}}, {origin}, query);
}

std::optional<FoundRoute> RouteSearcher::BestCompletion(
    const std::vector<int>& prefix, const Query& query) {
  if (prefix.empty()) return std::nullopt;
  if (prefix.size() == 1) return Best(prefix[0], query);
  const int k = static_cast<int>(prefix.size()) - 1;
  std::vector<int> stages;
  double cost = 0;
  for (int i = 1; i <= k; ++i) {
    stages.push_back(view_.stage(prefix[i]));
    double pen = query.node_penalty && !query.node_penalty->empty()
                     ? (*query.node_penalty)[prefix[i]]
                     : 0.0;
    if (!std::isfinite(pen)) pen = 0;  // already visited: sunk
    cost += 2.5 * view_.forward_s(prefix[i]) + pen +
            2 * view_.hop_s(prefix[i - 1], prefix[i]);
  }
  const int max_swaps =
      query.max_swaps >= 0 ? query.max_swaps : workload_.max_swaps;
  int swaps = 0;
  int top = 0;
  for (size_t i = 0; i < stages.size(); ++i) {
    top = std::max(top, stages[i]);
    for (size_t j = i + 1; j < stages.size(); ++j) {
      if (stages[i] > stages[j]) ++swaps;
    }
  }
  const int cur = stages.back();
  std::vector<Start> starts;
  if (cur == top) {
    starts.push_back({k, swaps, 0, prefix.back(), cost});
    const bool below_free =
        top - 1 >= 1 &&
        std::find(stages.begin(), stages.end(), top - 1) == stages.end();
    if (below_free && swaps < max_swaps) {
      starts.push_back({k, swaps + 1, 1, prefix.back(), cost});
    }
  } else if (cur == top - 1) {
    starts.push_back({k, swaps, 2, prefix.back(), cost});
  } else {
    return std::nullopt;  // the prefix itself breaks the rules
  }
  return Run(prefix[0], starts, prefix, query);
}

std::optional<FoundRoute> RouteSearcher::Run(int origin,
                                             const std::vector<Start>& starts,
                                             const std::vector<int>& prefix,
                                             const Query& query) {
  const int p = query.path_length > 0 ? query.path_length
                                      : workload_.path_length;
  max_swaps_ = query.max_swaps >= 0 ? query.max_swaps : workload_.max_swaps;
  const int jump = workload_.max_jump;
  const int num_stages = view_.num_stages();
  const std::vector<double>* pen =
      query.node_penalty && !query.node_penalty->empty() ? query.node_penalty
                                                         : nullptr;
  auto node_cost = [&](int v) {
    return 2.5 * view_.forward_s(v) + (pen ? (*pen)[v] : 0.0);
  };

  // Candidate nodes per stage, never nodes already on the prefix.
  candidates_.assign(num_stages, {});
  for (int s = 1; s < num_stages; ++s) {
    if (query.stage_allowed && !query.stage_allowed->empty() &&
        !(*query.stage_allowed)[s]) {
      continue;
    }
    std::vector<int>& list = candidates_[s];
    for (int v : view_.stage_nodes(s)) {
      if (!std::isfinite(node_cost(v))) continue;
      if (std::find(prefix.begin(), prefix.end(), v) != prefix.end()) continue;
      list.push_back(v);
    }
    if (query.max_candidates > 0 &&
        static_cast<int>(list.size()) > query.max_candidates) {
      auto score = [&](int v) {
        return 2 * view_.hop_s(origin, v) + node_cost(v);
      };
      std::stable_sort(list.begin(), list.end(),
                       [&](int a, int b) { return score(a) < score(b); });
      list.resize(query.max_candidates);
    }
  }

  const size_t states = static_cast<size_t>(p) * (max_swaps_ + 1) * 3 * n_;
  cost_.assign(states, kInf);
  parent_.assign(states, -1);
  int first_k = p;
  for (const Start& s : starts) {
    if (s.k >= p || s.swaps > max_swaps_) continue;
    const int idx = Index(s.k, s.swaps, s.mode, s.node);
    if (s.cost < cost_[idx]) {
      cost_[idx] = s.cost;
      parent_[idx] = kStartMarker;
    }
    first_k = std::min(first_k, s.k);
  }
  auto relax = [&](int from, int k, int w, int m, int u, double c) {
    const int idx = Index(k, w, m, u);
    if (c < cost_[idx]) {
      cost_[idx] = c;
      parent_[idx] = from;
    }
  };
  // Only start nodes and candidates can hold a finite cost.
  std::vector<int>& active = active_;
  active.clear();
  for (const Start& st : starts) active.push_back(st.node);
  for (const std::vector<int>& list : candidates_) {
    active.insert(active.end(), list.begin(), list.end());
  }
  std::sort(active.begin(), active.end());
  active.erase(std::unique(active.begin(), active.end()), active.end());
  for (int k = first_k; k < p - 1; ++k) {
    for (int w = 0; w <= max_swaps_; ++w) {
      for (int m = 0; m < 3; ++m) {
        for (int v : active) {
          const int from = Index(k, w, m, v);
          const double c = cost_[from];
          if (!std::isfinite(c)) continue;
          const int cur = view_.stage(v);
          if (m == 1) {
            for (int u : candidates_[cur - 1]) {
              relax(from, k + 1, w, 2, u,
                    c + 2 * view_.hop_s(v, u) + node_cost(u));
            }
            continue;
          }
          const int top = m == 0 ? cur : cur + 1;
          const int last = std::min(cur + jump, num_stages - 1);
          for (int t = top + 1; t <= last; ++t) {
            for (int u : candidates_[t]) {
              relax(from, k + 1, w, 0, u,
                    c + 2 * view_.hop_s(v, u) + node_cost(u));
            }
            if (w < max_swaps_ && t + 1 <= last && k + 2 <= p - 1 &&
                !candidates_[t].empty()) {
              for (int u : candidates_[t + 1]) {
                relax(from, k + 1, w + 1, 1, u,
                      c + 2 * view_.hop_s(v, u) + node_cost(u));
              }
            }
          }
        }
      }
    }
  }
  double best = kInf;
  int best_idx = -1;
  for (int w = 0; w <= max_swaps_; ++w) {
    for (int m : {0, 2}) {
      for (int v : active) {
        const int idx = Index(p - 1, w, m, v);
        if (!std::isfinite(cost_[idx])) continue;
        const double total = cost_[idx] + 2 * view_.hop_s(v, origin);
        if (total < best) {
          best = total;
          best_idx = idx;
        }
      }
    }
  }
  if (best_idx < 0) return std::nullopt;
  std::vector<int> tail;
  for (int idx = best_idx; idx >= 0; idx = parent_[idx]) {
    tail.push_back(idx % n_);
    if (parent_[idx] == kStartMarker) break;
  }
  std::reverse(tail.begin(), tail.end());
  FoundRoute found;
  found.nodes.assign(prefix.begin(), prefix.end() - 1);
  found.nodes.insert(found.nodes.end(), tail.begin(), tail.end());
  found.nodes.push_back(origin);
  found.latency_s = RouteLatency(view_, found.nodes);
  found.cost = best + 2.75 * view_.forward_s(origin);
  return found;
}

}  // namespace skipswarm::scheduler
