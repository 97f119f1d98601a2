#include "scheduler/allocation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace skipswarm::scheduler {
namespace {

double Speed(const ModelShape& model, const NodeSpec& node) {
  return 1.0 / (2.5 * node.sec_per_layer_sample * model.layers_per_stage *
                model.samples_per_mb);
}

// Weakest stage first: among the stages whose capacity is within 1% of
// the weakest one (adding the node there raises the swarm's minimum the
// most), the one with the best link score, then the lowest stage.
int PickStage(const std::vector<double>& capacity,
              const std::vector<double>& link_score) {
  const int num_stages = static_cast<int>(capacity.size());
  double weakest = std::numeric_limits<double>::infinity();
  for (int s = 1; s < num_stages; ++s) weakest = std::min(weakest, capacity[s]);
  int best = -1;
  for (int s = 1; s < num_stages; ++s) {
    if (capacity[s] > weakest * 1.01 + 1e-12) continue;
    if (best < 0 || link_score[s] < link_score[best]) best = s;
  }
  return best;
}

double MeanHop(const std::vector<double>& hops) {
  double sum = 0;
  int n = 0;
  for (double h : hops) {
    if (std::isfinite(h)) {
      sum += h;
      ++n;
    }
  }
  return n ? sum / n : std::numeric_limits<double>::infinity();
}

}  // namespace

absl::StatusOr<std::vector<int>> AllocateStages(
    const ModelShape& model, const std::vector<NodeSpec>& nodes,
    const std::vector<double>& hop_s) {
  const int n = static_cast<int>(nodes.size());
  if (model.num_stages < 2) {
    return absl::InvalidArgumentError("model needs at least 2 stages");
  }
  if (hop_s.size() != static_cast<size_t>(n) * n) {
    return absl::InvalidArgumentError("hop matrix size mismatch");
  }
  std::vector<int> stage(n);
  std::vector<int> free;
  for (int v = 0; v < n; ++v) {
    if (!(nodes[v].sec_per_layer_sample > 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "node '", nodes[v].name, "' has no positive sec_per_layer_sample"));
    }
    stage[v] = nodes[v].stage;
    if (stage[v] < 0) free.push_back(v);
  }
  if (static_cast<int>(free.size()) < model.num_stages - 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        free.size(), " nodes cannot cover ", model.num_stages - 1,
        " non-data stages"));
  }
  std::stable_sort(free.begin(), free.end(), [&](int a, int b) {
    return nodes[a].sec_per_layer_sample < nodes[b].sec_per_layer_sample;
  });
  std::vector<double> capacity(model.num_stages, 0);
  for (int v : free) {
    std::vector<double> link(model.num_stages, 0);
    for (int s = 1; s < model.num_stages; ++s) {
      std::vector<double> hops;
      for (int u = 0; u < n; ++u) {
        if (u != v && (stage[u] == 0 || stage[u] == s - 1 || stage[u] == s + 1)) {
          hops.push_back(hop_s[static_cast<size_t>(v) * n + u]);
        }
      }
      link[s] = MeanHop(hops);
    }
    const int s = PickStage(capacity, link);
    stage[v] = s;
    capacity[s] += Speed(model, nodes[v]);
  }
  return stage;
}

std::vector<double> StageCapacities(const TopologyView& view) {
  std::vector<double> capacity(view.num_stages(), 0);
  for (int s = 0; s < view.num_stages(); ++s) {
    for (int v : view.stage_nodes(s)) capacity[s] += 1 / (2.5 * view.forward_s(v));
  }
  return capacity;
}

absl::StatusOr<int> ChooseStageForJoiner(const TopologyView& view,
                                         const NodeSpec& joiner,
                                         const std::vector<double>& hop_to) {
  return ChooseStageForJoiner(view, joiner, hop_to, JoinChoiceOptions());
}

absl::StatusOr<int> ChooseStageForJoiner(const TopologyView& view,
                                         const NodeSpec& joiner,
                                         const std::vector<double>& hop_to,
                                         const JoinChoiceOptions& options) {
  if (hop_to.size() != static_cast<size_t>(view.num_nodes())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hop_to has ", hop_to.size(), " entries for ", view.num_nodes(),
        " nodes"));
  }
  if (!(joiner.sec_per_layer_sample > 0)) {
    return absl::InvalidArgumentError("joiner has no positive speed");
  }
  std::vector<double> link(view.num_stages(), 0);
  for (int s = 1; s < view.num_stages(); ++s) {
    std::vector<double> hops;
    for (int t : {0, s - 1, s + 1}) {
      if (t < 0 || t >= view.num_stages()) continue;
      for (int u : view.stage_nodes(t)) hops.push_back(hop_to[u]);
    }
    link[s] = MeanHop(hops);
  }
  const std::vector<double> capacity = StageCapacities(view);
  if (options.allow_data_stage && view.num_stages() >= 2) {
    double weakest_other = std::numeric_limits<double>::infinity();
    for (int s = 1; s < view.num_stages(); ++s) {
      weakest_other = std::min(weakest_other, capacity[s]);
    }
    if (capacity[0] * 1.01 + 1e-12 < weakest_other) return 0;
  }
  return PickStage(capacity, link);
}

std::optional<StageMove> SuggestRebalance(const TopologyView& view,
                                          double ratio) {
  std::vector<double> capacity = StageCapacities(view);
  const int num_stages = view.num_stages();
  double mean = 0;
  int weakest = 1;
  for (int s = 1; s < num_stages; ++s) {
    mean += capacity[s];
    if (capacity[s] < capacity[weakest]) weakest = s;
  }
  mean /= num_stages - 1;
  if (capacity[weakest] >= ratio * mean) return std::nullopt;
  const double current_min = capacity[weakest];
  std::optional<StageMove> best;
  double best_min = current_min;
  for (int s = 1; s < num_stages; ++s) {
    if (s == weakest || view.stage_nodes(s).size() < 2) continue;
    for (int v : view.stage_nodes(s)) {
      const double speed = 1 / (2.5 * view.forward_s(v));
      double new_min = std::numeric_limits<double>::infinity();
      for (int t = 1; t < num_stages; ++t) {
        double c = capacity[t];
        if (t == s) c -= speed;
        if (t == weakest) c += speed;
        new_min = std::min(new_min, c);
      }
      if (new_min > best_min + 1e-12) {
        best_min = new_min;
        best = StageMove{v, s, weakest};
      }
    }
  }
  return best;
}

std::optional<RebalanceMove> ChooseRebalanceMove(const TopologyView& view,
                                                 const RebalanceOptions& options) {
  const int num_stages = view.num_stages();
  if (num_stages < 3) return std::nullopt;  // one non-data stage: nowhere to go
  const std::vector<double> capacity = StageCapacities(view);
  auto bottleneck = [&](int v, int from, int to) {
    const double speed = 1 / (2.5 * view.forward_s(v));
    double m = std::numeric_limits<double>::infinity();
    for (int s = 1; s < num_stages; ++s) {
      double c = capacity[s];
      if (s == from) c -= speed;
      if (s == to) c += speed;
      m = std::min(m, c);
    }
    return m;
  };
  double before = std::numeric_limits<double>::infinity();
  for (int s = 1; s < num_stages; ++s) before = std::min(before, capacity[s]);
  std::optional<RebalanceMove> best;
  for (int from = 1; from < num_stages; ++from) {
    const std::vector<int>& nodes = view.stage_nodes(from);
    if (nodes.size() < 2) continue;  // never the last replica
    for (int v : nodes) {
      if (std::find(options.pinned.begin(), options.pinned.end(), v) != options.pinned.end()) {
        continue;
      }
      for (int to = 1; to < num_stages; ++to) {
        if (to == from) continue;
        const double after = bottleneck(v, from, to);
        if (!(after >= before * (1 + options.min_gain)) || !std::isfinite(after)) continue;
        const bool better =
            !best || after > best->bottleneck_after * (1 + 1e-9) ||
            (after >= best->bottleneck_after * (1 - 1e-9) &&
             (view.forward_s(v) < view.forward_s(best->node) ||
              (view.forward_s(v) == view.forward_s(best->node) && v < best->node)));
        if (better) best = RebalanceMove{v, from, to, before, after};
      }
    }
  }
  return best;
}

}  // namespace skipswarm::scheduler
