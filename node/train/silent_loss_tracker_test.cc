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

}  // namespace
}  // namespace skipswarm::node
