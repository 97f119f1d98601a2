#include "scheduler/topology.h"

#include <cmath>
#include <deque>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace skipswarm::scheduler {

double HopSeconds(const LinkSpec& link, double bytes_per_mb,
                  double overhead_s) {
  if (link.bandwidth_bytes_per_s <= 0) return kNoLink;
  return link.latency_s + bytes_per_mb / link.bandwidth_bytes_per_s +
         overhead_s;
}

absl::StatusOr<TopologyView> TopologyView::Create(ModelShape model,
                                                  std::vector<NodeSpec> nodes,
                                                  std::vector<double> hop_s) {
  if (model.num_stages < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model needs at least 2 stages (data stage + one more), got ",
        model.num_stages));
  }
  if (model.layers_per_stage < 1 || model.samples_per_mb < 1) {
    return absl::InvalidArgumentError(
        "model layers_per_stage and samples_per_mb must be >= 1");
  }
  if (!(model.bytes_per_mb >= 0) || std::isinf(model.bytes_per_mb)) {
    return absl::InvalidArgumentError("model bytes_per_mb must be >= 0");
  }
  const size_t n = nodes.size();
  if (hop_s.size() != n * n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hop matrix has ", hop_s.size(), " entries, expected ", n * n));
  }
  absl::flat_hash_set<std::string> names;
  for (const NodeSpec& node : nodes) {
    const std::string who = absl::StrCat("node '", node.name, "'");
    if (node.name.empty()) return absl::InvalidArgumentError("a node has no name");
    if (!names.insert(node.name).second) {
      return absl::InvalidArgumentError(absl::StrCat(who, " appears twice"));
    }
    if (node.stage < 0 || node.stage >= model.num_stages) {
      return absl::InvalidArgumentError(
          absl::StrCat(who, ": stage ", node.stage, " is outside 0..",
                       model.num_stages - 1));
    }
    if (!(node.sec_per_layer_sample > 0) ||
        std::isinf(node.sec_per_layer_sample)) {
      return absl::InvalidArgumentError(absl::StrCat(
          who, ": sec_per_layer_sample must be a positive number, got ",
          node.sec_per_layer_sample));
    }
    if (node.memory_slots < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          who, ": memory holds ", node.memory_slots,
          " micro-batches; at least 1 is needed to host a stage"));
    }
  }
  for (size_t u = 0; u < n; ++u) {
    for (size_t v = 0; v < n; ++v) {
      if (u == v) continue;
      const double d = hop_s[u * n + v];
      if (std::isnan(d) || d < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("link ", nodes[u].name, " -> ", nodes[v].name,
                         ": hop time must be >= 0 seconds, got ", d));
      }
      const double back = hop_s[v * n + u];
      if (std::fabs(d - back) > 1e-9 * std::max(1.0, std::fabs(d)) &&
          !(std::isinf(d) && std::isinf(back))) {
        return absl::InvalidArgumentError(absl::StrCat(
            "link ", nodes[u].name, " <-> ", nodes[v].name,
            " differs by direction (", d, " vs ", back,
            "); hops cost the same both ways"));
      }
    }
    hop_s[u * n + u] = 0;
  }
  TopologyView view;
  view.model_ = model;
  view.nodes_ = std::move(nodes);
  view.alive_.assign(n, true);
  view.hop_s_ = std::move(hop_s);
  view.forward_s_.resize(n);
  for (size_t v = 0; v < n; ++v) {
    view.forward_s_[v] = view.nodes_[v].sec_per_layer_sample *
                         model.layers_per_stage * model.samples_per_mb;
  }
  view.RebuildStageNodes();
  for (int s = 0; s < model.num_stages; ++s) {
    if (view.stage_nodes_[s].empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "stage ", s, s == 0 ? " (data stage)" : "", " has no node"));
    }
  }
  if (absl::Status st = view.CheckConnected(); !st.ok()) return st;
  return view;
}

void TopologyView::RebuildStageNodes() {
  stage_nodes_.assign(model_.num_stages, {});
  for (int v = 0; v < num_nodes(); ++v) {
    if (alive_[v]) stage_nodes_[nodes_[v].stage].push_back(v);
  }
}

// A stage is usable only if some data node can reach one of its nodes
// through finite links (relaying through other stages' nodes, as routes do).
absl::Status TopologyView::CheckConnected() const {
  const int n = num_nodes();
  std::vector<bool> seen(n, false);
  std::deque<int> queue;
  for (int d : data_nodes()) {
    seen[d] = true;
    queue.push_back(d);
  }
  while (!queue.empty()) {
    int u = queue.front();
    queue.pop_front();
    for (int v = 0; v < n; ++v) {
      if (!seen[v] && alive_[v] && std::isfinite(hop_s(u, v))) {
        seen[v] = true;
        queue.push_back(v);
      }
    }
  }
  for (int s = 1; s < num_stages(); ++s) {
    bool reached = false;
    std::vector<std::string> names;
    for (int v : stage_nodes_[s]) {
      reached = reached || seen[v];
      names.push_back(nodes_[v].name);
    }
    if (!reached) {
      return absl::InvalidArgumentError(absl::StrCat(
          "stage ", s, " is disconnected: none of its nodes (",
          absl::StrJoin(names, ", "), ") has a link path to a data node"));
    }
  }
  return absl::OkStatus();
}

int TopologyView::FindNode(const std::string& name) const {
  for (int v = 0; v < num_nodes(); ++v) {
    if (nodes_[v].name == name) return v;
  }
  return -1;
}

int TopologyView::FindNode(const common::NodeId& id) const {
  for (int v = 0; v < num_nodes(); ++v) {
    if (nodes_[v].id == id) return v;
  }
  return -1;
}

absl::StatusOr<TopologyView> TopologyView::WithoutNode(int v) const {
  if (v < 0 || v >= num_nodes()) {
    return absl::InvalidArgumentError(absl::StrCat("no node with index ", v));
  }
  TopologyView copy = *this;
  copy.alive_[v] = false;
  copy.RebuildStageNodes();
  if (copy.stage_nodes_[stage(v)].empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("node '", nodes_[v].name, "' was the last node of stage ",
                     stage(v)));
  }
  return copy;
}

}  // namespace skipswarm::scheduler
