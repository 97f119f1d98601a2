#include "scheduler/topology.h"

#include "gtest/gtest.h"
#include "scheduler/test_views.h"

namespace skipswarm::scheduler {
namespace {

struct Fixture {
  ModelShape model{3, 1, 1, 0};
  std::vector<NodeSpec> nodes;
  std::vector<double> hops;
  Fixture() {
    for (auto [name, stage] : std::vector<std::pair<std::string, int>>{
             {"d0", 0}, {"a", 1}, {"b", 2}}) {
      NodeSpec n;
      n.name = name;
      n.stage = stage;
      n.sec_per_layer_sample = 0.1;
      n.memory_slots = 2;
      nodes.push_back(n);
    }
    hops.assign(9, 0.2);
  }
  std::string Error() {
    auto view = TopologyView::Create(model, nodes, hops);
    return view.ok() ? "" : std::string(view.status().message());
  }
};

TEST(TopologyViewTest, BuildsAndComputesForwardCost) {
  Fixture f;
  f.model.layers_per_stage = 4;
  f.model.samples_per_mb = 2;
  auto view = TopologyView::Create(f.model, f.nodes, f.hops);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_DOUBLE_EQ(view->forward_s(1), 0.8);
  EXPECT_EQ(view->stage_nodes(2), std::vector<int>{2});
  EXPECT_EQ(view->FindNode("b"), 2);
}

TEST(TopologyViewTest, ErrorsNameTheProblem) {
  {
    Fixture f;
    f.nodes[2].stage = 1;
    EXPECT_NE(f.Error().find("stage 2 has no node"), std::string::npos);
  }
  {
    Fixture f;
    f.nodes[1].sec_per_layer_sample = -1;
    EXPECT_NE(f.Error().find("node 'a': sec_per_layer_sample"),
              std::string::npos);
  }
  {
    Fixture f;
    f.nodes[1].memory_slots = 0;
    EXPECT_NE(f.Error().find("memory holds 0"), std::string::npos);
  }
  {
    Fixture f;
    f.hops[0 * 3 + 2] = f.hops[2 * 3 + 0] = kNoLink;
    f.hops[1 * 3 + 2] = f.hops[2 * 3 + 1] = kNoLink;
    EXPECT_NE(f.Error().find("stage 2 is disconnected"), std::string::npos)
        << f.Error();
  }
  {
    Fixture f;
    f.hops[1] = -0.5;
    EXPECT_NE(f.Error().find("must be >= 0"), std::string::npos);
  }
  {
    Fixture f;
    f.hops[1] = 0.7;
    EXPECT_NE(f.Error().find("differs by direction"), std::string::npos);
  }
}

TEST(TopologyViewTest, WithoutNodeDropsItFromItsStage) {
  TopologyView view = testing::UniformView({1, 2}, 1.0, 0.5, 1);
  auto less = view.WithoutNode(1);
  ASSERT_TRUE(less.ok());
  EXPECT_EQ(less->stage_nodes(1), std::vector<int>{2});
  EXPECT_FALSE(less->alive(1));
  EXPECT_FALSE(less->WithoutNode(2).ok());  // last of its stage
}

}  // namespace
}  // namespace skipswarm::scheduler
