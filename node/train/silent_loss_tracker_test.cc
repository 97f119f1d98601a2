// SilentLossTracker's attribution rule and back-off, and ExcludingView's
// refusal to hide the last replica of a stage (Note [Silent relay
// exclusion] in silent_loss_tracker.h).
#include "node/train/silent_loss_tracker.h"

#include "gtest/gtest.h"

namespace skipswarm::node {
namespace {

using common::NodeId;

SilentLossOptions Options() {
  SilentLossOptions o;
  o.iterations_to_exclude = 2;
  o.backoff.initial = absl::Seconds(30);
  o.backoff.max = absl::Seconds(100);
  o.backoff.jitter = 0;  // exact durations
  o.min_iterations = 0;   // time only, but in the tests of Note [Exclusion in iterations]
  return o;
}

const NodeId kA = NodeId::ForName("a");
const NodeId kB = NodeId::ForName("b");
const NodeId kC = NodeId::ForName("c");  // a healthy relay elsewhere

TEST(SilentLossTrackerTest, ExcludesAfterTwoSuspectIterationsInARow) {
  SilentLossTracker t(Options(), /*seed=*/1);
  EXPECT_TRUE(t.EndIteration({kA, kB}, {kB}, absl::Seconds(1)).empty());
  EXPECT_TRUE(t.ExcludedAt(absl::Seconds(1)).empty());
  const auto e = t.EndIteration({kA, kB}, {kB}, absl::Seconds(2));
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].relay, kA);
  EXPECT_EQ(e[0].duration, absl::Seconds(30));
  EXPECT_EQ(e[0].times, 1);
  EXPECT_EQ(t.ExcludedAt(absl::Seconds(31)), std::vector<NodeId>{kA});
  EXPECT_TRUE(t.ExcludedAt(absl::Seconds(32)).empty());
}

TEST(SilentLossTrackerTest, ACompletedMicroBatchClearsTheRelay) {
  SilentLossTracker t(Options(), /*seed=*/1);
  t.EndIteration({kA}, {kC}, absl::Seconds(1));
  t.EndIteration({}, {kA}, absl::Seconds(2));  // it works after all
  EXPECT_TRUE(t.EndIteration({kA}, {kC}, absl::Seconds(3)).empty());
  // On a lost and a completed route in one iteration: not a suspect.
  EXPECT_TRUE(t.EndIteration({kA}, {kA}, absl::Seconds(4)).empty());
  EXPECT_TRUE(t.EndIteration({kA}, {kC}, absl::Seconds(5)).empty());
}

TEST(SilentLossTrackerTest, AnIterationWithoutTheRelayDoesNotBreakTheRun) {
  SilentLossTracker t(Options(), /*seed=*/1);
  t.EndIteration({kA}, {kB}, absl::Seconds(1));
  t.EndIteration({}, {kB}, absl::Seconds(2));
  EXPECT_EQ(t.EndIteration({kA}, {kB}, absl::Seconds(3)).size(), 1u);
}

TEST(SilentLossTrackerTest, ReadmittedRelayThatLosesAgainIsExcludedLongerUpToTheCap) {
  SilentLossTracker t(Options(), /*seed=*/1);
  t.EndIteration({kA}, {kC}, absl::Seconds(0));
  ASSERT_EQ(t.EndIteration({kA}, {kC}, absl::Seconds(0)).size(), 1u);  // 30 s
  // A loss of an MB planned before the exclusion: nothing new.
  EXPECT_TRUE(t.EndIteration({kA}, {kC}, absl::Seconds(10)).empty());
  absl::Duration now = absl::Seconds(30);
  for (const absl::Duration want : {absl::Seconds(60), absl::Seconds(100), absl::Seconds(100)}) {
    const auto e = t.EndIteration({kA}, {kC}, now);  // one suspect iteration is enough
    ASSERT_EQ(e.size(), 1u);
    EXPECT_EQ(e[0].duration, want);
    now += want;
  }
  // A completed MB forgets it: two suspect iterations again, 30 s again.
  t.EndIteration({}, {kA}, now);
  EXPECT_TRUE(t.EndIteration({kA}, {kC}, now).empty());
  const auto e = t.EndIteration({kA}, {kC}, now);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].duration, absl::Seconds(30));
}

TEST(SilentLossTrackerTest, AnIterationThatCompletedNothingIsNoEvidence) {
  SilentLossTracker t(Options(), /*seed=*/1);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(t.EndIteration({kA, kB}, {}, absl::Seconds(i)).empty());
  t.EndIteration({kA}, {kB}, absl::Seconds(5));
  EXPECT_TRUE(t.EndIteration({kA, kB}, {}, absl::Seconds(6)).empty());  // does not break the run
  EXPECT_EQ(t.EndIteration({kA}, {kB}, absl::Seconds(7)).size(), 1u);
}

// Note [Nothing completed]: every MB lost, all through a then b.
TEST(SilentLossTrackerTest, AnIterationThatCompletedNothingBlamesTheFirstRelayEveryLostRouteShares) {
  SilentLossTracker t(Options(), /*seed=*/1);
  const SilentLossTracker::NothingCompleted shared{{kA, kB}, {}};
  EXPECT_TRUE(t.EndIteration({kA, kB, kC}, {}, absl::Seconds(1), shared).empty());
  const auto e = t.EndIteration({kA, kB, kC}, {}, absl::Seconds(2), shared);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].relay, kA);
  EXPECT_EQ(t.ExcludedAt(absl::Seconds(2)), std::vector<NodeId>{kA});
  // Routes that share no relay: no evidence.
  SilentLossTracker none(Options(), /*seed=*/1);
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(none.EndIteration({kA, kB}, {}, absl::Seconds(i), {{}, {}}).empty());
  }
}

TEST(SilentLossTrackerTest, NothingCompletedIsNoEvidenceWhenASharedRelayIsALastReplica) {
  SilentLossTracker t(Options(), /*seed=*/1);
  // b, which every lost route also passes, could not be planned around:
  // it alone may explain the losses (a slow sole host).
  const SilentLossTracker::NothingCompleted shared{{kA, kB}, {kB}};
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(t.EndIteration({kA, kB}, {}, absl::Seconds(i), shared).empty());
  }
  EXPECT_TRUE(t.ExcludedAt(absl::Seconds(4)).empty());
  // Nor does it break a run of suspect iterations.
  t.EndIteration({kA}, {kC}, absl::Seconds(5));
  EXPECT_TRUE(t.EndIteration({kA, kB}, {}, absl::Seconds(6), shared).empty());
  EXPECT_EQ(t.EndIteration({kA}, {kC}, absl::Seconds(7)).size(), 1u);
}

// Note [Exclusion in iterations]: iterations far longer than the back-off.
TEST(SilentLossTrackerTest, AnExclusionLastsAtLeastItsIterationsDoublingWithEachExclusion) {
  SilentLossOptions o = Options();
  o.min_iterations = 2;  // back-offs 30 s, 60 s, 100 s: floors 2, 4, 6 (100/30 x 2)
  SilentLossTracker t(o, /*seed=*/1);
  absl::Duration now;
  const absl::Duration iteration = absl::Minutes(5);
  t.EndIteration({kA}, {kC}, now);
  ASSERT_EQ(t.EndIteration({kA}, {kC}, now).size(), 1u);
  for (const int floor : {2, 4, 6}) {
    for (int i = 0; i < floor; ++i) {
      EXPECT_EQ(t.ExcludedAt(now), std::vector<NodeId>{kA}) << "floor " << floor << " at " << i;
      now += iteration;
      EXPECT_TRUE(t.EndIteration({}, {kC}, now).empty());
    }
    EXPECT_TRUE(t.ExcludedAt(now).empty()) << "floor " << floor;
    ASSERT_EQ(t.EndIteration({kA}, {kC}, now).size(), 1u);  // still silent
  }
}

TEST(LastReplicasTest, NamesTheRelaysNothingCouldBePlannedAround) {
  const NodeId data = NodeId::ForName("data");
  StaticSwarmView view({{data, {0}, 4, "", ""},
                        {kA, {1}, 4, "", ""},
                        {kB, {1}, 4, "", ""},
                        {kC, {2}, 4, "", ""}});
  using Set = absl::flat_hash_set<NodeId>;
  EXPECT_EQ(LastReplicas(view, {kA, kB, kC}), Set{kC});
  EXPECT_EQ(LastReplicas(view, {data}), Set{data});
  // a excluded: b is the last planned replica of stage 1.
  const ExcludingView planning(view, {kA});
  EXPECT_EQ(LastReplicas(planning, {kB, kC}), (Set{kB, kC}));
}

TEST(SilentLossTrackerTest, NeverExcludesWhenDisabled) {
  SilentLossOptions o = Options();
  o.iterations_to_exclude = 0;
  SilentLossTracker t(o, /*seed=*/1);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(t.EndIteration({kA}, {kC}, absl::Seconds(i)).empty());
}

TEST(ExcludingViewTest, HidesAnExcludedRelayButNeverTheLastReplicaOfAStage) {
  const NodeId data = NodeId::ForName("data");
  StaticSwarmView view({{data, {0}, 4, "", ""},
                        {kA, {1}, 4, "", ""},
                        {kB, {1}, 4, "", ""}});
  const ExcludingView one(view, {kA});
  EXPECT_EQ(one.hidden(), std::vector<NodeId>{kA});
  EXPECT_EQ(one.Replicas(1), std::vector<NodeId>{kB});
  EXPECT_FALSE(one.IsAlive(kA));
  EXPECT_TRUE(one.IsAlive(kB));
  EXPECT_EQ(one.Members().size(), 3u);
  // Both excluded: the first (ascending id) is hidden, the other kept.
  const ExcludingView both(view, {kB, kA});
  EXPECT_EQ(both.hidden().size(), 1u);
  EXPECT_EQ(both.kept().size(), 1u);
  EXPECT_EQ(both.Replicas(1).size(), 1u);
  // A data node is never hidden.
  const ExcludingView self(view, {data});
  EXPECT_EQ(self.kept(), std::vector<NodeId>{data});
  EXPECT_EQ(self.Replicas(0), std::vector<NodeId>{data});
  // The other replica died: the excluded one is the last, kept.
  view.MarkDead(kB);
  const ExcludingView last(view, {kA});
  EXPECT_EQ(last.kept(), std::vector<NodeId>{kA});
  EXPECT_EQ(last.Replicas(1), std::vector<NodeId>{kA});
}

// Note [Stopping drops]: `always` hides a node even as its stage's last
// replica, and an excluded relay left as the last one beside it is kept.
TEST(ExcludingViewTest, AlwaysHiddenNodesGoEvenAsTheLastReplica) {
  const NodeId data = NodeId::ForName("data");
  StaticSwarmView view({{data, {0}, 4, "", ""},
                        {kA, {1}, 4, "", ""},
                        {kB, {1}, 4, "", ""}});
  const ExcludingView stopping(view, {kA}, {kB});
  EXPECT_TRUE(stopping.hidden().empty());
  EXPECT_EQ(stopping.kept(), std::vector<NodeId>{kA});
  EXPECT_EQ(stopping.Replicas(1), std::vector<NodeId>{kA});
  EXPECT_FALSE(stopping.IsAlive(kB));
  const ExcludingView none_left(view, {}, {kA, kB});
  EXPECT_TRUE(none_left.Replicas(1).empty());
  EXPECT_FALSE(none_left.IsAlive(kA));
  EXPECT_EQ(none_left.Members().size(), 3u);
}

}  // namespace
}  // namespace skipswarm::node
