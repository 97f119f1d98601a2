#include "node/daemon/gossip/join_planning.h"

#include "gtest/gtest.h"
#include "node/daemon/gossip/test_members.h"

namespace skipswarm::node {
namespace {

using testing::TestMember;
using testing::TestView;

membership::MemberInfo Member(const std::string& name, std::vector<uint32_t> stages,
                              uint64_t entry = 0, double speed = 1e-3) {
  membership::MemberInfo m = TestMember(name, std::move(stages));
  m.iteration = entry;
  m.seconds_per_layer_per_sample = speed;
  return m;
}

scheduler::ModelShape Shape() {
  scheduler::ModelShape s;
  s.num_stages = 3;
  s.layers_per_stage = 1;
  s.samples_per_mb = 2;
  return s;
}

TEST(JoinPlanningTest, JoinerGoesToTheWeakestStage) {
  const common::NodeId me = common::NodeId::ForName("me");
  // Stage 1 has two replicas, stage 2 one: the joiner adds to stage 2.
  membership::View v = TestView({Member("d", {0}), Member("a", {1}), Member("b", {1}),
                               Member("c", {2})});
  EXPECT_EQ(*ChooseJoinStage(v, me, Shape(), 1e-3), 2);
  // A slow replica makes its stage the weakest even with two hosts.
  v = TestView({Member("d", {0}), Member("a", {1}, 0, 9e-3), Member("b", {1}, 0, 9e-3),
              Member("c", {2})});
  EXPECT_EQ(*ChooseJoinStage(v, me, Shape(), 1e-3), 1);
}

TEST(JoinPlanningTest, DataStageOnlyWhenTheDataNodesAreTheBottleneck) {
  const common::NodeId me = common::NodeId::ForName("me");
  membership::View v = TestView({Member("d", {0}, 0, 4e-3), Member("a", {1}), Member("c", {2})});
  EXPECT_EQ(*ChooseJoinStage(v, me, Shape(), 1e-3, /*allow_data_stage=*/true), 0);
  EXPECT_NE(*ChooseJoinStage(v, me, Shape(), 1e-3, /*allow_data_stage=*/false), 0);
}

// Note [Stage rebalancing] from each member's side: only the chosen one
// moves; nobody while someone is entering.
TEST(JoinPlanningTest, OnlyTheChosenMemberMovesAndNotWhileSomeoneEnters) {
  const auto d = Member("d", {0}), a = Member("a", {1}), b = Member("b", {1}, 0, 2e-3),
             c = Member("c", {2}, 0, 4e-3);
  const membership::View v = TestView({d, a, b, c});
  // Capacities (visits/s): a 200, b 100, c 50; stage 1 = 300, stage 2 =
  // 50. Moving b gives min(200, 150) = x3, moving a min(100, 250) = x2.
  absl::StatusOr<std::optional<OwnMove>> mine = ChooseOwnMove(v, b.id, Shape(), 10, 0.2);
  ASSERT_TRUE(mine.ok()) << mine.status();
  ASSERT_TRUE(mine->has_value());
  EXPECT_EQ((*mine)->from, 1);
  EXPECT_EQ((*mine)->to, 2);
  EXPECT_NEAR((*mine)->gain, 3.0, 1e-9);
  for (const auto& other : {d, a, c}) {
    EXPECT_FALSE(ChooseOwnMove(v, other.id, Shape(), 10, 0.2)->has_value());
  }
  const membership::View entering = TestView({d, a, b, c, Member("j", {2}, 12)});
  EXPECT_FALSE(ChooseOwnMove(entering, b.id, Shape(), 10, 0.2)->has_value());
  // A mover past its switch whose state is not loaded yet (Note [Routed
  // once ready]) is still moving: nobody else moves before it is ready.
  auto loading = Member("m", {2}, 9, 4e-2);  // 5 visits/s: b still moves once it is ready
  loading.entering = true;
  EXPECT_FALSE(ChooseOwnMove(TestView({d, a, b, c, loading}), b.id, Shape(), 10, 0.2)->has_value());
  loading.entering = false;
  EXPECT_TRUE(ChooseOwnMove(TestView({d, a, b, c, loading}), b.id, Shape(), 10, 0.2)->has_value());
  // A margin above the gain: nobody.
  EXPECT_FALSE(ChooseOwnMove(v, b.id, Shape(), 10, 2.5)->has_value());
}

// Note [Paused members]: a paused replica is no capacity. With a paused,
// b is stage 1's only trainer: moving it would leave stage 1 to a paused
// member, so nobody moves (the rule used to move b, as above).
TEST(JoinPlanningTest, NoMoveLeavesAStageWithPausedReplicasOnly) {
  auto a = Member("a", {1});
  a.paused = true;
  const auto d = Member("d", {0}), b = Member("b", {1}, 0, 2e-3), c = Member("c", {2}, 0, 4e-3);
  const membership::View v = TestView({d, a, b, c});
  for (const auto& m : {d, a, b, c}) {
    absl::StatusOr<std::optional<OwnMove>> move = ChooseOwnMove(v, m.id, Shape(), 10, 0.2);
    ASSERT_TRUE(move.ok()) << move.status();
    EXPECT_FALSE(move->has_value()) << m.id.ShortString() << " moves";
  }
}

// Note [Paused members]: a joiner counts no paused replica as capacity
// either. Speeds (visits/s): a, b and e 1000 each, c 1667. Counting a
// paused a, stage 1 (a + b: 2000) looked stronger than stage 2 and the
// joiner went to stage 2; without it stage 1 has 1000 and is the weakest.
// With a and b paused stage 1 has nothing (and its topology without them
// would not build).
TEST(JoinPlanningTest, JoinerCountsNoPausedReplicaAsCapacity) {
  const common::NodeId me = common::NodeId::ForName("me");
  auto a = Member("a", {1}), b = Member("b", {1});
  const auto d = Member("d", {0}), c = Member("c", {2}, 0, 6e-4);
  EXPECT_EQ(*ChooseJoinStage(TestView({d, a, b, c}), me, Shape(), 1e-3), 2);
  a.paused = true;
  EXPECT_EQ(*ChooseJoinStage(TestView({d, a, b, c}), me, Shape(), 1e-3), 1);
  b.paused = true;
  absl::StatusOr<int> s = ChooseJoinStage(TestView({d, a, b, c}), me, Shape(), 1e-3);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, 1);
  // An unpaused e gives stage 1 back its 1000: still the weaker of the two.
  EXPECT_EQ(*ChooseJoinStage(TestView({d, a, b, c, Member("e", {1})}), me, Shape(), 1e-3), 1);
  // And the data stage: a data node's paused record (which no daemon of
  // ours signs) does not stop a joiner.
  auto pd = d;
  pd.paused = true;
  s = ChooseJoinStage(TestView({pd, a, b, c}), me, Shape(), 1e-3);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, 1);
}

TEST(JoinPlanningTest, MultiStageMembersNeedAnExplicitStage) {
  membership::View v = TestView({Member("d", {0}), Member("a", {1, 2})});
  absl::StatusOr<int> s = ChooseJoinStage(v, common::NodeId::ForName("me"), Shape(), 1e-3);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(JoinPlanningTest, SourcesAreLiveHostsFoundersFirst) {
  auto late = Member("late", {1}, 12);
  auto dead = Member("dead", {1});
  dead.state = proto::MEMBER_STATE_DEAD;
  // Still fetching its own state (Note [Routed once ready]): nothing to give.
  auto entering = Member("entering", {1}, 13);
  entering.entering = true;
  membership::View v =
      TestView({Member("d", {0}), late, dead, entering, Member("x", {1}), Member("y", {2})});
  std::vector<std::string> addresses;
  for (const StateSource& s : StateSources(v, common::NodeId::ForName("me"), 1)) {
    addresses.push_back(s.address);
  }
  EXPECT_EQ(addresses, (std::vector<std::string>{"x:s", "late:s"}));
}

TEST(JoinPlanningTest, SubnetworkMembersAreNoPipelineCapacity) {
  const common::NodeId me = common::NodeId::ForName("me");
  // An SDP worker hosting {0, 1, 2} beside a pipeline with one replica per
  // stage: it is no capacity of stage 1 or 2 (and its three stages are no
  // "member with several stages" error).
  membership::MemberInfo w = Member("w", {0, 1, 2});
  w.subnetwork = true;
  membership::View v =
      TestView({Member("d", {0}), Member("a", {1}), Member("b", {1}), Member("c", {2}), w});
  absl::StatusOr<int> s = ChooseJoinStage(v, me, Shape(), 1e-3);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, 2);
}

}  // namespace
}  // namespace skipswarm::node
