#include "scheduler/synthetic.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/random.h"

namespace skipswarm::scheduler {

absl::StatusOr<Scenario> MakeSyntheticScenario(const SyntheticOptions& o) {
  if (o.num_nodes < o.num_stages || o.num_stages < 2 || o.num_regions < 1) {
    return absl::InvalidArgumentError(
        "synthetic swarm needs num_nodes >= num_stages >= 2 and a region");
  }
  common::Random rng = common::Random(o.seed).Fork("synthetic");
  std::vector<double> rx(o.num_regions), ry(o.num_regions);
  for (int r = 0; r < o.num_regions; ++r) {
    rx[r] = rng.Uniform(0, 1);
    ry[r] = rng.Uniform(0, 1);
  }
  ModelShape model;
  model.num_stages = o.num_stages;
  std::vector<NodeSpec> nodes(o.num_nodes);
  std::vector<int> region(o.num_nodes);
  for (int v = 0; v < o.num_nodes; ++v) {
    region[v] = static_cast<int>(rng.UniformInt(0, o.num_regions - 1));
    nodes[v].name = absl::StrCat("n", v);
    nodes[v].id = common::NodeId::ForName(nodes[v].name);
    nodes[v].stage = v % o.num_stages;
    nodes[v].region = absl::StrCat("r", region[v]);
    nodes[v].sec_per_layer_sample = o.forward_s * rng.Uniform(0.5, 1.5);
    nodes[v].memory_slots = o.memory_slots;
  }
  const size_t n = nodes.size();
  std::vector<double> hops(n * n, 0);
  for (size_t u = 0; u < n; ++u) {
    for (size_t v = u + 1; v < n; ++v) {
      const int a = region[u], b = region[v];
      const double dist = std::hypot(rx[a] - rx[b], ry[a] - ry[b]);
      // 0.35 s within a region up to ~3.5 s across the plane, plus noise.
      const double d = (0.35 + 2.5 * dist) * rng.Uniform(0.9, 1.1);
      hops[u * n + v] = hops[v * n + u] = d;
    }
  }
  Scenario sc;
  sc.name = absl::StrCat("synthetic ", o.num_nodes, " nodes x ", o.num_stages,
                         " stages (seed ", o.seed, ")");
  absl::StatusOr<TopologyView> view =
      TopologyView::Create(model, std::move(nodes), std::move(hops));
  if (!view.ok()) return view.status();
  sc.view = *std::move(view);
  sc.workload.mb_per_data_node = o.mb_per_data_node;
  sc.workload.path_length =
      o.path_length > 0 ? o.path_length : std::max(2, o.num_stages / 2);
  if (absl::Status st = ValidateWorkload(sc.view, sc.workload); !st.ok()) {
    return st;
  }
  return sc;
}

}  // namespace skipswarm::scheduler
