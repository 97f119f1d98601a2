#include "node/daemon/gossip/hosted_stages.h"

#include <algorithm>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "node/daemon/gossip/test_members.h"

namespace skipswarm::node {
namespace {

using testing::TestMember;
using testing::TestView;

membership::MemberInfo Member(const std::string& name, std::vector<uint32_t> stages,
                              bool paused = false) {
  membership::MemberInfo m = TestMember(name, std::move(stages));
  m.paused = paused;
  return m;
}

bool Names(const std::vector<int>& stages, int s) {
  return std::find(stages.begin(), stages.end(), s) != stages.end();
}

// Note [Hosted stages snapshot]: `me` moves from stage 1 to stage 2, whose
// only other replica is paused. Stage 1 keeps an unpaused replica (a).
// Every snapshot of the move names stage 2, so the pause is refused before
// and after the switch; the mix a check used to be able to read (the old
// stage without the move) would have let it pause.
TEST(HostedStagesTest, APauseDuringAStageMoveChecksTheNewStageAtEveryStep) {
  const common::NodeId me = common::NodeId::ForName("me");
  const membership::View view =
      TestView({Member("d", {0}), Member("a", {1}), Member("p", {2}, /*paused=*/true),
              Member("me", {2})});
  HostedStages hosted({1});
  EXPECT_TRUE(CheckPause(hosted.Get(), true, view, me, 10, false).ok());

  hosted.BeginMove(2);
  HostedStages::Snapshot before = hosted.Get();
  EXPECT_EQ(before.stages, std::vector<int>{1});
  EXPECT_EQ(before.moving_to, 2);
  absl::Status s = CheckPause(before, true, view, me, 10, false);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("last unpaused live replica of stage 2"), std::string::npos) << s;

  hosted.FinishMove();
  HostedStages::Snapshot after = hosted.Get();
  EXPECT_EQ(after.stages, std::vector<int>{2});
  EXPECT_FALSE(after.moving_to.has_value());
  s = CheckPause(after, true, view, me, 10, false);
  EXPECT_NE(s.message().find("last unpaused live replica of stage 2"), std::string::npos) << s;

  // The torn read (list before the switch, move after it) let it through.
  HostedStages::Snapshot torn{{1}, std::nullopt};
  EXPECT_TRUE(CheckPause(torn, true, view, me, 10, false).ok());
  // --force pauses anyway.
  EXPECT_TRUE(CheckPause(after, true, view, me, 10, true).ok());
  // A second FinishMove (no move pending) changes nothing.
  hosted.FinishMove();
  EXPECT_EQ(hosted.Get().stages, std::vector<int>{2});
}

TEST(HostedStagesTest, DataNodesAndNodesNotTrainingCannotPause) {
  const common::NodeId me = common::NodeId::ForName("me");
  const membership::View view = TestView({Member("d", {0}), Member("a", {1}), Member("b", {1})});
  absl::Status s = CheckPause(HostedStages::Snapshot{{0}, std::nullopt}, true, view, me, 1, true);
  EXPECT_NE(s.message().find("data node cannot pause"), std::string::npos) << s;
  s = CheckPause(HostedStages::Snapshot{{1}, std::nullopt}, false, view, me, 1, true);
  EXPECT_NE(s.message().find("not training yet"), std::string::npos) << s;
  s = CheckPause(HostedStages::Snapshot{{}, std::nullopt}, true, view, me, 1, true);
  EXPECT_NE(s.message().find("not training yet"), std::string::npos) << s;
  EXPECT_TRUE(CheckPause(HostedStages::Snapshot{{1}, std::nullopt}, true, view, me, 1, false).ok());
}

TEST(HostedStagesTest, LeavingIsRefusedForTheLastLiveReplicaOfAHostedStage) {
  const common::NodeId me = common::NodeId::ForName("me");
  const membership::View view = TestView({Member("d", {0}), Member("a", {1})});
  EXPECT_TRUE(CheckLeave(HostedStages::Snapshot{{1}, std::nullopt}, view, me, 1, false).ok());
  absl::Status s = CheckLeave(HostedStages::Snapshot{{2}, std::nullopt}, view, me, 1, false);
  EXPECT_NE(s.message().find("last live replica of stage 2"), std::string::npos) << s;
  EXPECT_TRUE(CheckLeave(HostedStages::Snapshot{{2}, std::nullopt}, view, me, 1, true).ok());
}

// Note [Simultaneous leavers]: a replica that is itself about to leave or
// stops as a stage's last replica does not stay. Of two replicas checking
// at once (both records say leaving), the one with the smaller node id may
// leave and the larger one is refused: exactly one of them goes, where
// both used to pass and leave the stage with none.
TEST(HostedStagesTest, OfTwoReplicasLeavingAtOnceOnlyTheSmallerIdMayLeave) {
  membership::MemberInfo x = TestMember("x", {2}), y = TestMember("y", {2});
  membership::MemberInfo& small = x.id < y.id ? x : y;
  membership::MemberInfo& large = x.id < y.id ? y : x;
  small.leaving = large.leaving = true;
  const membership::View both = TestView({Member("d", {0}), small, large});
  const HostedStages::Snapshot stage2{{2}, std::nullopt};
  EXPECT_TRUE(CheckLeave(stage2, both, small.id, 1, false).ok());
  absl::Status refused = CheckLeave(stage2, both, large.id, 1, false);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
  EXPECT_NE(refused.message().find("last live replica of stage 2"), std::string::npos);
  EXPECT_TRUE(CheckLeave(stage2, both, large.id, 1, true).ok()) << "--force still leaves";

  // The larger one stops as the last replica: the smaller may not leave
  // either (neither stays).
  large.leaving = false;
  large.stopping = true;
  const membership::View stopping = TestView({Member("d", {0}), small, large});
  EXPECT_TRUE(absl::IsFailedPrecondition(CheckLeave(stage2, stopping, small.id, 1, false)));
  // A third replica that neither leaves nor stops stays for both.
  const membership::View third =
      TestView({Member("d", {0}), small, large, Member("z", {2})});
  EXPECT_TRUE(CheckLeave(stage2, third, small.id, 1, false).ok());
  EXPECT_TRUE(CheckLeave(stage2, third, large.id, 1, false).ok());
}

// The control thread's reads while main's thread switches: once a
// snapshot shows the move, every later one names the new stage (no
// snapshot is torn). Each run's outcome is the same whatever the
// interleaving.
TEST(HostedStagesTest, SnapshotsTakenDuringASwitchAreNeverTorn) {
  HostedStages hosted({1});
  hosted.BeginMove(2);
  std::thread switcher([&] { hosted.FinishMove(); });
  bool switched = false;
  for (int i = 0; i < 20000 && !switched; ++i) {
    const HostedStages::Snapshot s = hosted.Get();
    ASSERT_TRUE(Names(s.Committed(), 2)) << i;
    // Either {1} moving to 2, or {2}.
    if (s.moving_to.has_value()) {
      ASSERT_EQ(s.stages, std::vector<int>{1});
    } else {
      ASSERT_EQ(s.stages, std::vector<int>{2});
      switched = true;
    }
  }
  switcher.join();
  EXPECT_EQ(hosted.Get().stages, std::vector<int>{2});
}

}  // namespace
}  // namespace skipswarm::node
