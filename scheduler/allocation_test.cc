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

// Note [Stage rebalancing].
TEST(AllocationTest, RebalanceMovesAReplicaToTheBottleneckOnlyForAClearGain) {
  // Stage 1: three replicas, stage 2: one. Moving one of stage 1's raises
  // the bottleneck from 1 to 2 replicas' worth (+100%).
  TopologyView view = testing::UniformView({1, 3, 1}, 1.0, 0.5, 2);
  std::optional<RebalanceMove> move = ChooseRebalanceMove(view, {});
  ASSERT_TRUE(move.has_value());
  EXPECT_EQ(move->from, 1);
  EXPECT_EQ(move->to, 2);
  EXPECT_NEAR(move->bottleneck_after / move->bottleneck_before, 2.0, 1e-9);
  EXPECT_EQ(view.stage_nodes(1)[0], move->node) << "ties: the lowest index";
  // After the move (2 and 2) nothing qualifies, in particular not the move back.
  TopologyView moved = testing::UniformView({1, 2, 2}, 1.0, 0.5, 2);
  EXPECT_FALSE(ChooseRebalanceMove(moved, {}).has_value());
  // (2, 3) replicas: the best move makes (3, 2), the bottleneck stays at
  // 2 replicas' worth; no gain, no move.
  TopologyView close = testing::UniformView({1, 2, 3}, 1.0, 0.5, 2);
  EXPECT_FALSE(ChooseRebalanceMove(close, {}).has_value());
}

TEST(AllocationTest, RebalanceNeverMovesTheLastReplicaOrAPinnedNode) {
  // Stage 1 has one fast node, stage 2 one slow one: moving either would
  // leave a stage empty.
  std::vector<NodeSpec> nodes = {Node("d", 0, 1), Node("fast", 1, 0.25), Node("slow", 2, 4)};
  ModelShape model{3, 1, 1, 0};
  TopologyView one_each = *TopologyView::Create(model, nodes, std::vector<double>(9, 0.1));
  EXPECT_FALSE(ChooseRebalanceMove(one_each, {}).has_value());
  // With a second replica on stage 1 it may move, unless pinned.
  nodes.push_back(Node("fast2", 1, 0.25));
  TopologyView two = *TopologyView::Create(model, nodes, std::vector<double>(16, 0.1));
  std::optional<RebalanceMove> move = ChooseRebalanceMove(two, {});
  ASSERT_TRUE(move.has_value());
  EXPECT_EQ(move->to, 2);
  RebalanceOptions pinned;
  pinned.pinned = {1, 3};
  EXPECT_FALSE(ChooseRebalanceMove(two, pinned).has_value());
}

TEST(AllocationTest, RebalanceUsesMeasuredSpeedsAndTheMoveThatRaisesTheBottleneckMost) {
  // Equal replica counts, but stage 2's node is 4x slower than the others:
  // stage 1's fastest replica moves there.
  std::vector<NodeSpec> nodes = {Node("d", 0, 1), Node("a", 1, 1), Node("b", 1, 0.5),
                                 Node("c", 2, 4), Node("e", 2, 4)};
  ModelShape model{3, 1, 1, 0};
  TopologyView view = *TopologyView::Create(model, nodes, std::vector<double>(25, 0.1));
  std::optional<RebalanceMove> move = ChooseRebalanceMove(view, {});
  ASSERT_TRUE(move.has_value());
  // a -> stage 2: (0.8, 0.6) visits/s; b -> stage 2: (0.4, 1.0): a's move
  // leaves the higher minimum.
  EXPECT_EQ(move->node, 1);
  EXPECT_EQ(move->from, 1);
  EXPECT_EQ(move->to, 2);
}

}  // namespace
}  // namespace skipswarm::scheduler
