#include "scheduler/test_views.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace skipswarm::scheduler::testing {

TopologyView UniformView(const std::vector<int>& per_stage, double forward_s,
                         double hop_s, int slots) {
  ModelShape model;
  model.num_stages = static_cast<int>(per_stage.size());
  std::vector<NodeSpec> nodes;
  for (int s = 0; s < model.num_stages; ++s) {
    for (int i = 0; i < per_stage[s]; ++i) {
      NodeSpec node;
      node.name = s == 0 ? absl::StrCat("d", i) : absl::StrCat("s", s, "n", i);
      node.stage = s;
      node.sec_per_layer_sample = forward_s;
      node.memory_slots = slots;
      nodes.push_back(node);
    }
  }
  const size_t n = nodes.size();
  std::vector<double> hops(n * n, hop_s);
  auto view = TopologyView::Create(model, nodes, hops);
  EXPECT_TRUE(view.ok()) << view.status();
  return *view;
}

Route MakeRoute(int mb, std::vector<int> nodes, int priority) {
  Route r;
  r.mb = mb;
  r.origin = nodes.front();
  r.nodes = std::move(nodes);
  r.priority = priority;
  return r;
}

}  // namespace skipswarm::scheduler::testing
