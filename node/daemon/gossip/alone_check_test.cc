#include "node/daemon/gossip/alone_check.h"

#include <optional>
#include <string>
#include <vector>

#include "common/sim_clock.h"
#include "gtest/gtest.h"

namespace skipswarm::node {
namespace {

using membership::MemberInfo;
using membership::View;

MemberInfo Member(const std::string& name, std::vector<uint32_t> stages, proto::MemberState state,
                  uint64_t iteration = 0) {
  MemberInfo m;
  m.id = common::NodeId::ForName(name);
  m.stages = std::move(stages);
  m.state = state;
  m.iteration = iteration;
  return m;
}

// The experiment's swarm (tools/experiments/data_split.sh): d0 and d1 on
// stage 0, s1r0 and s2r0 on stages 1 and 2, seen by d0.
View SwarmOfD0(proto::MemberState d1, uint64_t d1_iteration, proto::MemberState relays) {
  View v;
  v.self = common::NodeId::ForName("d0");
  v.members = {Member("d0", {0}, proto::MEMBER_STATE_ALIVE),
               Member("d1", {0}, d1, d1_iteration),
               Member("s1r0", {1}, relays, relays == proto::MEMBER_STATE_LEFT ? 119 : 0),
               Member("s2r0", {2}, relays, relays == proto::MEMBER_STATE_LEFT ? 119 : 0)};
  return v;
}

constexpr uint64_t kIterations = 120;

// Note [Alone after the swarm], as the experiment's `after` case found it:
// d0 resumed at iteration 40 after every other member finished and exited.
// Its own probes called them all DEAD (their LEFT never reached it); it sat
// paused forever. Now it stops once it has been alone for the bound,
// without knowing whether the run finished.
TEST(AloneCheckTest, AMemberWhosePeersAreAllDeadStopsAfterTheBound) {
  common::SimClock clock;
  AloneCheck check(absl::Minutes(2), 3, &clock);
  const View dead = SwarmOfD0(proto::MEMBER_STATE_DEAD, 0, proto::MEMBER_STATE_DEAD);
  std::optional<AloneVerdict> v;
  int polls = 0;
  // The daemon's loop polls every 100 ms.
  while (!(v = check.Poll(dead, 40, kIterations)).has_value() && polls < 10000) {
    clock.Advance(absl::Milliseconds(100));
    ++polls;
  }
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->kind, AloneVerdict::kAlone);
  EXPECT_EQ(v->at, 40u);
  EXPECT_EQ(v->alone_for, absl::Minutes(2));
  EXPECT_EQ(polls, 1200);
}

// Another data node LEFT after the run's last iteration: the swarm trained
// the whole run without us, which the verdict says (exit 0, no checkpoint).
TEST(AloneCheckTest, ADataNodeThatLeftAfterTheLastIterationMeansTheSwarmFinished) {
  common::SimClock clock;
  AloneCheck check(absl::Seconds(30), 3, &clock);
  const View left = SwarmOfD0(proto::MEMBER_STATE_LEFT, 119, proto::MEMBER_STATE_DEAD);
  EXPECT_FALSE(check.Poll(left, 40, kIterations).has_value());
  clock.Advance(absl::Seconds(29));
  EXPECT_FALSE(check.Poll(left, 40, kIterations).has_value());
  clock.Advance(absl::Seconds(1));
  const std::optional<AloneVerdict> v = check.Poll(left, 40, kIterations);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->kind, AloneVerdict::kSwarmFinished);
  EXPECT_EQ(v->at, 119u);
  // A data node drained before the end is no proof that the run finished;
  // neither is a relay that left after the last iteration.
  AloneCheck early(absl::Seconds(30), 3, &clock);
  const View drained = SwarmOfD0(proto::MEMBER_STATE_LEFT, 80, proto::MEMBER_STATE_LEFT);
  EXPECT_FALSE(early.Poll(drained, 40, kIterations).has_value());
  clock.Advance(absl::Seconds(30));
  const std::optional<AloneVerdict> w = early.Poll(drained, 40, kIterations);
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->kind, AloneVerdict::kAlone);
}

// A swarm that still trains never stops us, and a live peer that shows up
// (a healed partition, a refuted verdict) restarts the bound: a member is
// only ever stopped after `after` alone without a break.
TEST(AloneCheckTest, ALivePeerRestartsTheBound) {
  common::SimClock clock;
  AloneCheck check(absl::Seconds(30), 3, &clock);
  const View training = SwarmOfD0(proto::MEMBER_STATE_ALIVE, 0, proto::MEMBER_STATE_ALIVE);
  const View suspect = SwarmOfD0(proto::MEMBER_STATE_SUSPECT, 0, proto::MEMBER_STATE_DEAD);
  const View dead = SwarmOfD0(proto::MEMBER_STATE_DEAD, 0, proto::MEMBER_STATE_DEAD);
  for (int i = 0; i < 100; ++i) {
    EXPECT_FALSE(check.Poll(training, 40, kIterations).has_value());
    clock.Advance(absl::Seconds(1));
  }
  EXPECT_FALSE(check.Poll(dead, 40, kIterations).has_value());
  clock.Advance(absl::Seconds(29));
  EXPECT_FALSE(check.Poll(suspect, 40, kIterations).has_value());  // alive again
  clock.Advance(absl::Seconds(1));
  EXPECT_FALSE(check.Poll(dead, 40, kIterations).has_value());  // the bound starts again
  clock.Advance(absl::Seconds(29));
  EXPECT_FALSE(check.Poll(dead, 40, kIterations).has_value());
  clock.Advance(absl::Seconds(1));
  EXPECT_TRUE(check.Poll(dead, 40, kIterations).has_value());
}

// A member hosting every stage trains alone by design: never a verdict.
TEST(AloneCheckTest, AMemberHostingEveryStageIsNeverAlone) {
  common::SimClock clock;
  AloneCheck check(absl::Seconds(30), 3, &clock);
  View v;
  v.self = common::NodeId::ForName("solo");
  v.members = {Member("solo", {0, 1, 2}, proto::MEMBER_STATE_ALIVE),
               Member("gone", {1}, proto::MEMBER_STATE_DEAD)};
  for (int i = 0; i < 10; ++i) {
    EXPECT_FALSE(check.Poll(v, 40, kIterations).has_value());
    clock.Advance(absl::Minutes(1));
  }
  // Dropping a stage (a one-stage member of the same view) counts at once.
  v.members[0].stages = {0};
  EXPECT_FALSE(check.Poll(v, 40, kIterations).has_value());
  clock.Advance(absl::Seconds(30));
  EXPECT_TRUE(check.Poll(v, 40, kIterations).has_value());
}

// The daemon polls every 100 ms; the view is built once a second.
TEST(AloneCheckTest, DueOnceASecond) {
  common::SimClock clock;
  AloneCheck check(absl::Seconds(30), 3, &clock);
  int due = 0;
  for (int i = 0; i < 100; ++i) {
    due += check.Due() ? 1 : 0;
    clock.Advance(absl::Milliseconds(100));
  }
  EXPECT_EQ(due, 10);
}

}  // namespace
}  // namespace skipswarm::node
