#include "scheduler/allocation.h"

#include "gtest/gtest.h"
#include "scheduler/test_views.h"

namespace skipswarm::scheduler {
namespace {

NodeSpec Node(const std::string& name, int stage, double t) {
  NodeSpec n;
  n.name = name;
  n.stage = stage;
  n.sec_per_layer_sample = t;
  n.memory_slots = 2;
  return n;
}

TEST(AllocationTest, FormationFillsTheWeakestStageFirst) {
  ModelShape model{3, 1, 1, 0};
  // One data node, four free nodes: two fast, two slow.
  std::vector<NodeSpec> nodes = {Node("d", 0, 1), Node("fast1", -1, 1),
                                 Node("slow1", -1, 2), Node("fast2", -1, 1),
                                 Node("slow2", -1, 2)};
  std::vector<double> hops(25, 0.1);
  auto stages = AllocateStages(model, nodes, hops);
  ASSERT_TRUE(stages.ok()) << stages.status();
  // Fast nodes go first, one per stage; slow ones then balance them.
  EXPECT_EQ((*stages)[0], 0);
  EXPECT_NE((*stages)[1], (*stages)[3]);
  EXPECT_NE((*stages)[2], (*stages)[4]);
}

TEST(AllocationTest, LinksBreakTies) {
  ModelShape model{3, 1, 1, 0};
  std::vector<NodeSpec> nodes = {Node("d", 0, 1), Node("a", -1, 1),
                                 Node("b", -1, 1)};
  // "a" is far from everything; "b" is close. Both stages are empty, so
  // "a" (placed first, index order) takes the stage... either; check that
  // the result covers both stages.
  std::vector<double> hops = {0, 5, 0.1, 5, 0, 5, 0.1, 5, 0};
  auto stages = AllocateStages(model, nodes, hops);
  ASSERT_TRUE(stages.ok());
  EXPECT_NE((*stages)[1], (*stages)[2]);
}

TEST(AllocationTest, NotEnoughNodesIsAnError) {
  ModelShape model{4, 1, 1, 0};
  std::vector<NodeSpec> nodes = {Node("d", 0, 1), Node("a", -1, 1)};
  auto stages = AllocateStages(model, nodes, std::vector<double>(4, 0.1));
  EXPECT_EQ(stages.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(AllocationTest, JoinerGoesToTheWeakestStage) {
  // Stage 1 has two nodes, stage 2 one: a joiner goes to stage 2.
  TopologyView view = testing::UniformView({1, 2, 1}, 1.0, 0.5, 2);
  auto s = ChooseStageForJoiner(view, Node("new", -1, 1),
                                std::vector<double>(view.num_nodes(), 0.2));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, 2);
}

TEST(AllocationTest, JoinerTakesTheDataStageOnlyWhenItIsClearlyTheBottleneck) {
  // One data node against two replicas of every other stage: stage 0 has
  // half their capacity.
  TopologyView starved = testing::UniformView({1, 2, 2}, 1.0, 0.5, 2);
  const std::vector<double> hops(starved.num_nodes(), 0.2);
  EXPECT_EQ(*ChooseStageForJoiner(starved, Node("new", -1, 1), hops, {true}), 0);
  // The old entry point never offers it (simulator callers).
  EXPECT_NE(*ChooseStageForJoiner(starved, Node("new", -1, 1), hops), 0);
  EXPECT_NE(*ChooseStageForJoiner(starved, Node("new", -1, 1), hops, {false}), 0);
  // Equal capacities: a tie never makes a data node.
  TopologyView even = testing::UniformView({2, 2, 2}, 1.0, 0.5, 2);
  EXPECT_NE(*ChooseStageForJoiner(even, Node("new", -1, 1),
                                  std::vector<double>(even.num_nodes(), 0.2), {true}),
            0);
}

TEST(AllocationTest, SuggestsMovingANodeToAStarvedStage) {
  TopologyView view = testing::UniformView({1, 3, 1}, 1.0, 0.5, 2);
  auto move = SuggestRebalance(view);
  ASSERT_TRUE(move.has_value());
  EXPECT_EQ(move->from, 1);
  EXPECT_EQ(move->to, 2);
  TopologyView even = testing::UniformView({1, 2, 2}, 1.0, 0.5, 2);
  EXPECT_FALSE(SuggestRebalance(even).has_value());
}

}  // namespace
}  // namespace skipswarm::scheduler
