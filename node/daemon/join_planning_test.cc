#include "node/daemon/join_planning.h"

#include "gtest/gtest.h"

namespace skipswarm::node {
namespace {

membership::MemberInfo Member(const std::string& name, std::vector<uint32_t> stages,
                              uint64_t entry = 0, double speed = 1e-3) {
  membership::MemberInfo m;
  m.id = common::NodeId::ForName(name);
  m.stages = std::move(stages);
  m.iteration = entry;
  m.memory_slots = 2;
  m.seconds_per_layer_per_sample = speed;
  m.addresses = {name + ":g", name + ":p", name + ":r", name + ":s"};
  return m;
}

membership::View ViewOf(std::vector<membership::MemberInfo> members) {
  membership::View v;
  std::sort(members.begin(), members.end(),
            [](const auto& a, const auto& b) { return a.id < b.id; });
  v.members = std::move(members);
  return v;
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
  membership::View v = ViewOf({Member("d", {0}), Member("a", {1}), Member("b", {1}),
                               Member("c", {2})});
  EXPECT_EQ(*ChooseJoinStage(v, me, Shape(), 1e-3), 2);
  // A slow replica makes its stage the weakest even with two hosts.
  v = ViewOf({Member("d", {0}), Member("a", {1}, 0, 9e-3), Member("b", {1}, 0, 9e-3),
              Member("c", {2})});
  EXPECT_EQ(*ChooseJoinStage(v, me, Shape(), 1e-3), 1);
}

TEST(JoinPlanningTest, MultiStageMembersNeedAnExplicitStage) {
  membership::View v = ViewOf({Member("d", {0}), Member("a", {1, 2})});
  absl::StatusOr<int> s = ChooseJoinStage(v, common::NodeId::ForName("me"), Shape(), 1e-3);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(JoinPlanningTest, SourcesAreLiveHostsFoundersFirst) {
  auto late = Member("late", {1}, 12);
  auto dead = Member("dead", {1});
  dead.state = proto::MEMBER_STATE_DEAD;
  membership::View v = ViewOf({Member("d", {0}), late, dead, Member("x", {1}), Member("y", {2})});
  std::vector<std::string> addresses;
  for (const StateSource& s : StateSources(v, common::NodeId::ForName("me"), 1)) {
    addresses.push_back(s.address);
  }
  EXPECT_EQ(addresses, (std::vector<std::string>{"x:s", "late:s"}));
}

}  // namespace
}  // namespace skipswarm::node
