#include "scheduler/route.h"

#include <cmath>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace skipswarm::scheduler {

absl::Status ValidateWorkload(const TopologyView& view, const Workload& w) {
  // Bounded: every planner allocates per micro-batch (1e9 was a bad_alloc).
  constexpr int kMaxMbPerDataNode = 1 << 16;
  if (w.mb_per_data_node < 1 || w.mb_per_data_node > kMaxMbPerDataNode) {
    return absl::InvalidArgumentError(absl::StrCat("mb_per_data_node must be in 1..",
                                                   kMaxMbPerDataNode, ", got ",
                                                   w.mb_per_data_node));
  }
  if (w.path_length < 2 || w.path_length > view.num_stages()) {
    return absl::InvalidArgumentError(
        absl::StrCat("path_length must be in 2..", view.num_stages(),
                     " (number of stages), got ", w.path_length));
  }
  if (w.max_swaps < 0 || w.max_jump < 1) {
    return absl::InvalidArgumentError("max_swaps must be >= 0, max_jump >= 1");
  }
  if (!(w.balance_tolerance >= 0)) {
    return absl::InvalidArgumentError("balance_tolerance must be >= 0");
  }
  return absl::OkStatus();
}

bool StagesObeyRules(const std::vector<int>& stages, int max_swaps,
                     int max_jump) {
  int inversions = 0;
  int prev = 0;
  for (size_t i = 0; i < stages.size(); ++i) {
    if (stages[i] > prev && stages[i] - prev > max_jump) return false;
    prev = stages[i];
    for (size_t j = i + 1; j < stages.size(); ++j) {
      if (stages[i] > stages[j]) {
        if (stages[i] != stages[j] + 1) return false;
        ++inversions;
      }
    }
  }
  return inversions <= max_swaps;
}

std::vector<int> RouteStages(const TopologyView& view, const Route& route) {
  std::vector<int> stages;
  for (size_t i = 1; i + 1 < route.nodes.size(); ++i) {
    stages.push_back(view.stage(route.nodes[i]));
  }
  return stages;
}

std::string RouteToString(const TopologyView& view, const Route& route) {
  std::vector<std::string> parts;
  for (int v : route.nodes) {
    parts.push_back(absl::StrCat(view.node(v).name, "/s", view.stage(v)));
  }
  return absl::StrCat("mb ", route.mb, ": ", absl::StrJoin(parts, " -> "));
}

absl::Status ValidateRoute(const TopologyView& view, const Workload& w,
                           const Route& route, int path_length) {
  const std::string who = absl::StrCat("route of mb ", route.mb);
  const auto& nodes = route.nodes;
  if (nodes.size() < 3) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, " has ", nodes.size(), " nodes; needs >= 3"));
  }
  for (int v : nodes) {
    if (v < 0 || v >= view.num_nodes()) {
      return absl::InvalidArgumentError(
          absl::StrCat(who, ": node index ", v, " out of range"));
    }
    if (!view.alive(v)) {
      return absl::InvalidArgumentError(absl::StrCat(
          who, ": node '", view.node(v).name, "' is dead"));
    }
  }
  if (nodes.front() != route.origin || nodes.back() != route.origin ||
      view.stage(route.origin) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        who, ": must start and end at its origin, a data node (stage 0)"));
  }
  const int p = static_cast<int>(nodes.size()) - 1;
  if (path_length >= 0 && p != path_length) {
    return absl::InvalidArgumentError(absl::StrCat(
        who, " visits ", p, " stages; path_length is ", path_length));
  }
  absl::flat_hash_set<int> seen;
  for (size_t i = 1; i + 1 < nodes.size(); ++i) {
    const int s = view.stage(nodes[i]);
    if (s == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(who, ": stage 0 may appear only first and last"));
    }
    if (!seen.insert(s).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(who, ": visits stage ", s, " twice"));
    }
  }
  for (size_t i = 0; i + 1 < nodes.size(); ++i) {
    if (!std::isfinite(view.hop_s(nodes[i], nodes[i + 1]))) {
      return absl::InvalidArgumentError(
          absl::StrCat(who, ": no link ", view.node(nodes[i]).name, " -> ",
                       view.node(nodes[i + 1]).name));
    }
  }
  if (!StagesObeyRules(RouteStages(view, route), w.max_swaps, w.max_jump)) {
    return absl::InvalidArgumentError(absl::StrCat(
        who, " breaks the swap/jump rules (max_swaps ", w.max_swaps,
        ", max_jump ", w.max_jump, "): ", RouteToString(view, route)));
  }
  return absl::OkStatus();
}

std::vector<int> StageVisits(const TopologyView& view, const Plan& plan) {
  std::vector<int> visits(view.num_stages(), 0);
  for (const Route& r : plan.routes) {
    for (size_t i = 0; i + 1 < r.nodes.size(); ++i) {
      const int v = r.nodes[i];
      if (v >= 0 && v < view.num_nodes()) ++visits[view.stage(v)];
    }
  }
  return visits;
}

VisitRange BalanceRange(const TopologyView& view, const Workload& w,
                        int total_visits) {
  const double mean =
      static_cast<double>(total_visits) / (view.num_stages() - 1);
  VisitRange range;
  range.min = static_cast<int>(std::ceil(mean * (1 - w.balance_tolerance) - 1e-9));
  range.max = static_cast<int>(std::floor(mean * (1 + w.balance_tolerance) + 1e-9));
  // A tolerance narrower than one visit still admits the nearest integers.
  range.min = std::min(range.min, static_cast<int>(std::floor(mean)));
  range.max = std::max(range.max, static_cast<int>(std::ceil(mean)));
  return range;
}

absl::Status ValidatePlan(const TopologyView& view, const Workload& w,
                          const Plan& plan, int path_length) {
  absl::flat_hash_set<int> mbs;
  int total = 0;
  for (const Route& r : plan.routes) {
    if (!mbs.insert(r.mb).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("mb ", r.mb, " has two routes"));
    }
    if (absl::Status st = ValidateRoute(view, w, r, path_length); !st.ok()) {
      return st;
    }
    total += static_cast<int>(r.nodes.size()) - 2;
  }
  const std::vector<int> visits = StageVisits(view, plan);
  const VisitRange range = BalanceRange(view, w, total);
  for (int s = 1; s < view.num_stages(); ++s) {
    if (visits[s] < range.min || visits[s] > range.max) {
      return absl::FailedPreconditionError(absl::StrCat(
          "stage ", s, " gets ", visits[s], " visits; balance allows ",
          range.min, "..", range.max));
    }
  }
  return absl::OkStatus();
}

}  // namespace skipswarm::scheduler
