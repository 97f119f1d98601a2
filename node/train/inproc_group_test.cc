#include "node/train/inproc_group.h"

#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "common/sim_clock.h"
#include "gtest/gtest.h"

namespace skipswarm::node {
namespace {

using common::NodeId;

GradientContribution Contribution(const NodeId& from, float value, absl::Duration close_after) {
  GradientContribution c;
  c.from = from;
  c.flat = {value, 2 * value};
  c.visits = 1;
  c.params_digest = 7;
  c.close_after = close_after;
  return c;
}

// Note [Late members] (sharded_reduce.h): the round closes at the first
// contribution's deadline with what arrived; the member that comes later
// gets that average, flagged late, and the survivors learn whom they left out.
TEST(InProcessGroupHubTest, ARoundClosesAtItsDeadlineAndTheLateMemberGetsItsResult) {
  common::SimClock clock;
  const NodeId a = NodeId::ForName("a"), b = NodeId::ForName("b"), c = NodeId::ForName("c");
  InProcessGroupHub hub(&clock, {{a, {1}, 1, "", ""}, {b, {1}, 1, "", ""}, {c, {1}, 1, "", ""}});
  std::vector<std::optional<absl::StatusOr<ReduceResult>>> got(3);
  auto record = [&](int i) {
    return [&got, i](absl::StatusOr<ReduceResult> r) { got[i] = std::move(r); };
  };
  hub.AllReduce(4, 1, Contribution(a, 1, absl::Seconds(2)), record(0));
  clock.Advance(absl::Seconds(1));
  hub.AllReduce(4, 1, Contribution(b, 2, absl::Seconds(2)), record(1));
  clock.Advance(absl::Milliseconds(999));
  EXPECT_FALSE(got[0].has_value());  // the deadline runs from the first one
  clock.Advance(absl::Milliseconds(1));
  ASSERT_TRUE(got[0].has_value() && got[1].has_value());
  ASSERT_TRUE(got[0]->ok()) << got[0]->status();
  const ReduceResult& on_time = **got[0];
  EXPECT_EQ(on_time.sum, (std::vector<float>{3, 6}));
  EXPECT_EQ(on_time.contributors, 2);
  EXPECT_FALSE(on_time.late);
  EXPECT_EQ(on_time.left_out, std::vector<NodeId>{c});
  EXPECT_EQ((*got[1])->sum, on_time.sum);

  clock.Advance(absl::Seconds(30));
  hub.AllReduce(4, 1, Contribution(c, 4, absl::Seconds(2)), record(2));
  clock.Advance(absl::ZeroDuration());
  ASSERT_TRUE(got[2].has_value() && got[2]->ok());
  EXPECT_TRUE((*got[2])->late);
  EXPECT_EQ((*got[2])->sum, on_time.sum);
  EXPECT_EQ((*got[2])->contributors, 2);
}

// Without a deadline (gradient averages) every member is waited for, up
// to the silent deadline (5 minutes before any wait was measured; below).
TEST(InProcessGroupHubTest, WithoutADeadlineTheRoundWaitsForEveryMember) {
  common::SimClock clock;
  const NodeId a = NodeId::ForName("a"), b = NodeId::ForName("b");
  InProcessGroupHub hub(&clock, {{a, {1}, 1, "", ""}, {b, {1}, 1, "", ""}});
  std::optional<absl::StatusOr<ReduceResult>> first;
  hub.AllReduce(0, 1, Contribution(a, 1, absl::InfiniteDuration()),
                [&](absl::StatusOr<ReduceResult> r) { first = std::move(r); });
  clock.Advance(absl::Minutes(4));
  EXPECT_FALSE(first.has_value());
  hub.AllReduce(0, 1, Contribution(b, 3, absl::InfiniteDuration()),
                [](absl::StatusOr<ReduceResult>) {});
  clock.Advance(absl::ZeroDuration());
  ASSERT_TRUE(first.has_value() && first->ok());
  EXPECT_EQ((*first)->sum, (std::vector<float>{4, 8}));
  EXPECT_TRUE((*first)->left_out.empty());
}

// Note [Silent members in the hub]: a replica that never contributes (its
// compute hangs while its process lives) is dropped once the round has
// waited the silent deadline, and the round finishes without it: factor x
// the slowest measured wait, at least the floor; the initial value before
// any. Before, its peer waited for ever (the simulator's hung-replica run
// lost every micro-batch of three iterations behind it).
TEST(InProcessGroupHubTest, ASilentMemberIsDroppedAfterTheSilentDeadline) {
  common::SimClock clock;
  const NodeId a = NodeId::ForName("a"), b = NodeId::ForName("b");
  InProcessGroupHub hub(&clock, {{a, {1}, 1, "", ""}, {b, {1}, 1, "", ""}});
  std::optional<absl::StatusOr<ReduceResult>> got;
  auto record = [&](absl::StatusOr<ReduceResult> r) { got = std::move(r); };
  // No wait measured yet: the initial 5 minutes.
  hub.AllReduce(0, 1, Contribution(a, 1, absl::InfiniteDuration()), record);
  clock.Advance(absl::Minutes(5) - absl::Milliseconds(1));
  EXPECT_FALSE(got.has_value());
  clock.Advance(absl::Milliseconds(1));
  ASSERT_TRUE(got.has_value() && got->ok());
  EXPECT_EQ((*got)->sum, (std::vector<float>{1, 2}));
  EXPECT_EQ((*got)->contributors, 1);
  // b is out of the later rounds too (as MarkDead): a is alone.
  EXPECT_TRUE(hub.SoleReplica(1, 1, a));

  // A measured wait sets the deadline: 4 x 10 s, at least 30 s.
  const NodeId c = NodeId::ForName("c"), d = NodeId::ForName("d");
  InProcessGroupHub measured(&clock, {{c, {2}, 1, "", ""}, {d, {2}, 1, "", ""}});
  got.reset();
  measured.AllReduce(0, 2, Contribution(c, 1, absl::InfiniteDuration()), record);
  clock.Advance(absl::Seconds(10));
  measured.AllReduce(0, 2, Contribution(d, 1, absl::InfiniteDuration()),
                     [](absl::StatusOr<ReduceResult>) {});
  clock.Advance(absl::ZeroDuration());
  ASSERT_TRUE(got.has_value() && got->ok());
  EXPECT_EQ((*got)->contributors, 2);
  got.reset();
  measured.AllReduce(1, 2, Contribution(c, 1, absl::InfiniteDuration()), record);
  clock.Advance(absl::Seconds(40) - absl::Milliseconds(1));
  EXPECT_FALSE(got.has_value());
  clock.Advance(absl::Milliseconds(1));
  ASSERT_TRUE(got.has_value() && got->ok());
  EXPECT_EQ((*got)->contributors, 1);
}

// Factor 0: the hub waits for every member for ever, as before.
TEST(InProcessGroupHubTest, ASilentDeadlineOfFactorZeroWaitsForEver) {
  common::SimClock clock;
  const NodeId a = NodeId::ForName("a"), b = NodeId::ForName("b");
  InProcessGroupHub hub(&clock, {{a, {1}, 1, "", ""}, {b, {1}, 1, "", ""}}, {},
                        SilentDeadlineOptions{.factor = 0});
  std::optional<absl::StatusOr<ReduceResult>> got;
  hub.AllReduce(0, 1, Contribution(a, 1, absl::InfiniteDuration()),
                [&](absl::StatusOr<ReduceResult> r) { got = std::move(r); });
  clock.Advance(absl::Hours(10));
  EXPECT_FALSE(got.has_value());
}

// Note [Stated bounds]: a data node that never reaches a barrier is
// dropped from it once BOTH the measured deadline (4 x the slowest wait)
// and 2 x the bound it stated at its last barrier (counted from that
// barrier's release) have passed; one that arrives late but within its
// bound is waited for. A dropped one that arrives again counts from the
// iteration after the newest barrier. Before, the hub's barrier waited
// for a data node that never arrives for ever.
TEST(InProcessGroupHubTest, ASilentDataNodeIsDroppedFromTheBarrierAfterItsStatedBound) {
  common::SimClock clock;
  const NodeId a = NodeId::ForName("a"), b = NodeId::ForName("b"), r = NodeId::ForName("r");
  InProcessGroupHub hub(&clock, {{a, {0}, 1, "", ""}, {b, {0}, 1, "", ""}, {r, {1}, 1, "", ""}});
  std::map<std::pair<uint64_t, int>, bool> passed_at;
  auto passed = [&](uint64_t iteration, int key) { return passed_at[{iteration, key}]; };
  auto arrive = [&](uint64_t iteration, const NodeId& who, int key, bool data,
                    absl::Duration bound = absl::Seconds(60)) {
    if (data) hub.StateIterationBound(iteration, who, bound);
    hub.Barrier(iteration, who, data, [&passed_at, iteration, key](absl::Status s) {
      EXPECT_TRUE(s.ok()) << s;
      passed_at[{iteration, key}] = true;
    });
  };
  // Iteration 0: a 10 s spread of arrivals; measured deadline 40 s, both
  // released at 10 s.
  arrive(0, a, 0, true);
  arrive(0, r, 2, false);
  clock.Advance(absl::Seconds(10));
  arrive(0, b, 1, true);
  clock.Advance(absl::ZeroDuration());
  ASSERT_TRUE(passed(0, 0) && passed(0, 1) && passed(0, 2));

  // Iteration 1: b arrives at 125 s: past the measured deadline (20 + 40 s)
  // but within 2 x its 60 s bound from its release (10 + 120 s): kept.
  clock.Advance(absl::Seconds(10));
  arrive(1, a, 0, true);
  arrive(1, r, 2, false);
  clock.Advance(absl::Seconds(105));
  EXPECT_FALSE(passed(1, 0));
  arrive(1, b, 1, true, absl::Seconds(300));
  clock.Advance(absl::ZeroDuration());
  ASSERT_TRUE(passed(1, 0) && passed(1, 1) && passed(1, 2));

  // Iteration 2: b never arrives. The measured deadline (4 x 105 s, held
  // to the 5 min ceiling: Note [Silent ceiling], from 130 s) passes at 430
  // s; b stated 300 s at 125 s: its own deadline, 125 + 2 x 300 s = 725 s,
  // is the later one.
  clock.Advance(absl::Seconds(5));
  arrive(2, a, 0, true);
  arrive(2, r, 2, false);
  clock.Advance(absl::Seconds(420));
  EXPECT_FALSE(passed(2, 0));
  clock.Advance(absl::Seconds(175) - absl::Milliseconds(1));
  EXPECT_FALSE(passed(2, 0));
  EXPECT_FALSE(passed(2, 2));
  clock.Advance(absl::Milliseconds(1));
  EXPECT_TRUE(passed(2, 0) && passed(2, 2));
  // Out of the later barriers too, until it arrives.
  arrive(3, a, 0, true);
  clock.Advance(absl::ZeroDuration());
  EXPECT_TRUE(passed(3, 0));

  // The way back: b reaches barrier 2 late and passes at once; it counts
  // again from iteration 4 (after the newest barrier, 3).
  arrive(2, b, 1, true);
  clock.Advance(absl::ZeroDuration());
  EXPECT_TRUE(passed(2, 1));
  arrive(3, b, 1, true);
  clock.Advance(absl::ZeroDuration());
  EXPECT_TRUE(passed(3, 1));
  arrive(4, a, 0, true);
  clock.Advance(absl::Seconds(1));
  EXPECT_FALSE(passed(4, 0));
  arrive(4, b, 1, true);
  clock.Advance(absl::ZeroDuration());
  EXPECT_TRUE(passed(4, 0) && passed(4, 1));
}

// Note [Stated pace] (silent_deadline.h), the daemons' rule: a data node
// whose iterations took 5 s, that then states 40 min and never arrives,
// counts as stating 20 x 5 s = 100 s: dropped 200 s after its release (the
// measured deadline, 30 s, passed before), not 80 min after.
TEST(InProcessGroupHubTest, AFastDataNodeStatingAHugeBoundIsDroppedAtItsPace) {
  common::SimClock clock;
  const NodeId a = NodeId::ForName("a"), b = NodeId::ForName("b");
  InProcessGroupHub hub(&clock, {{a, {0}, 1, "", ""}, {b, {0}, 1, "", ""}});
  std::map<uint64_t, bool> a_passed;
  auto arrive = [&](uint64_t iteration, const NodeId& who) {
    hub.Barrier(iteration, who, true, [&a_passed, iteration, who, a](absl::Status s) {
      EXPECT_TRUE(s.ok()) << s;
      if (who == a) a_passed[iteration] = true;
    });
  };
  for (uint64_t i = 0; i <= 6; ++i) {
    arrive(i, a);
    if (i > 0) clock.Advance(absl::Seconds(5));
    hub.StateIterationBound(i, b, i < 6 ? absl::Seconds(25) : absl::Minutes(40));
    arrive(i, b);
    clock.Advance(absl::ZeroDuration());
    ASSERT_TRUE(a_passed[i]) << "iteration " << i;
  }
  arrive(7, a);
  clock.Advance(absl::Seconds(200) - absl::Milliseconds(1));
  EXPECT_FALSE(a_passed[7]);
  clock.Advance(absl::Milliseconds(1));
  EXPECT_TRUE(a_passed[7]) << "held past 200 s by a statement of 40 min";
}

// Note [Silent ceiling] (silent_deadline.h): a data node held 30 min
// within its 40 min statement (its MBs ran to their deadlines) and then
// arrived completed a 30
// min barrier wait; the slowest-wait rule alone then waited 4 x that, 2 h,
// for the next member that went silent, data node or replica, far past
// anything stated. The wait that follows is the initial 5 min at most.
TEST(InProcessGroupHubTest, AHeldMemberThatArrivedDoesNotStretchTheNextSilentWait) {
  common::SimClock clock;
  const NodeId a = NodeId::ForName("a"), b = NodeId::ForName("b");
  const NodeId c = NodeId::ForName("c"), d = NodeId::ForName("d");
  InProcessGroupHub hub(&clock, {{a, {0}, 1, "", ""},
                                 {b, {0}, 1, "", ""},
                                 {c, {1}, 1, "", ""},
                                 {d, {1}, 1, "", ""}});
  std::map<uint64_t, bool> a_passed;
  auto arrive = [&](uint64_t iteration, const NodeId& who) {
    hub.Barrier(iteration, who, true, [&a_passed, iteration, who, a](absl::Status s) {
      EXPECT_TRUE(s.ok()) << s;
      if (who == a) a_passed[iteration] = true;
    });
  };
  hub.StateIterationBound(0, b, absl::Minutes(40));
  arrive(0, a);
  arrive(0, b);
  clock.Advance(absl::ZeroDuration());
  ASSERT_TRUE(a_passed[0]);
  // Iteration 1: b is held 30 min, within 2 x its 40 min, and arrives.
  arrive(1, a);
  clock.Advance(absl::Minutes(30));
  EXPECT_FALSE(a_passed[1]);
  hub.StateIterationBound(1, b, absl::Seconds(25));
  arrive(1, b);
  clock.Advance(absl::ZeroDuration());
  ASSERT_TRUE(a_passed[1]);

  // Iteration 2: b goes silent; dropped at the ceiling, not 2 h later.
  arrive(2, a);
  clock.Advance(absl::Minutes(5) - absl::Milliseconds(1));
  EXPECT_FALSE(a_passed[2]);
  clock.Advance(absl::Milliseconds(1));
  EXPECT_TRUE(a_passed[2]) << "a silent data node held the barrier past 5 min";

  // A replica that goes silent in the next round: the same 5 min.
  std::optional<absl::StatusOr<ReduceResult>> got;
  hub.AllReduce(2, 1, Contribution(c, 1, absl::InfiniteDuration()),
                [&](absl::StatusOr<ReduceResult> r) { got = std::move(r); });
  clock.Advance(absl::Minutes(5) - absl::Milliseconds(1));
  EXPECT_FALSE(got.has_value());
  clock.Advance(absl::Milliseconds(1));
  ASSERT_TRUE(got.has_value() && got->ok()) << "a silent replica held the round past 5 min";
  EXPECT_EQ((*got)->contributors, 1);
}

// A data node that never stated a bound (the daemons' group, a joiner
// before its first barrier) is never dropped from the hub's barrier.
TEST(InProcessGroupHubTest, ADataNodeWithoutAStatedBoundIsWaitedFor) {
  common::SimClock clock;
  const NodeId a = NodeId::ForName("a"), b = NodeId::ForName("b");
  InProcessGroupHub hub(&clock, {{a, {0}, 1, "", ""}, {b, {0}, 1, "", ""}});
  bool passed = false;
  hub.Barrier(0, a, true, [&](absl::Status) { passed = true; });
  clock.Advance(absl::Hours(10));
  EXPECT_FALSE(passed);
}

// Note [Relay without a data node] (data_node_wait.h): the hub answers from
// its live set, and Note [Waking on a data node]: a wake armed while no
// data node is live runs (on the clock, once) when one is admitted; a
// cancelled one never runs.
TEST(InProcessGroupHubTest, KnowsWhetherADataNodeIsLiveAndWakesWhenOneIsBack) {
  common::SimClock clock;
  const NodeId d = NodeId::ForName("d"), r = NodeId::ForName("r");
  const PeerInfo data{d, {0}, 1, "", ""};
  InProcessGroupHub hub(&clock, {data, {r, {1}, 1, "", ""}});
  EXPECT_TRUE(hub.HasLiveDataNode(0));
  hub.MarkDead(d);
  EXPECT_FALSE(hub.HasLiveDataNode(0));
  int woken = 0, cancelled_woken = 0;
  const uint64_t wake = hub.WakeOnDataNode([&] { ++woken; });
  const uint64_t cancelled = hub.WakeOnDataNode([&] { ++cancelled_woken; });
  ASSERT_NE(wake, 0u);
  EXPECT_TRUE(hub.CancelDataNodeWake(cancelled));
  clock.Advance(absl::Seconds(10));
  EXPECT_EQ(woken, 0);
  hub.Admit(data, 3);
  EXPECT_TRUE(hub.HasLiveDataNode(0));
  EXPECT_EQ(woken, 0);  // never inline
  clock.RunDue();
  EXPECT_EQ(woken, 1);
  EXPECT_EQ(cancelled_woken, 0);
  EXPECT_FALSE(hub.CancelDataNodeWake(wake));
  // With a data node live, a wake runs at once (on the clock).
  hub.WakeOnDataNode([&] { ++woken; });
  clock.RunDue();
  EXPECT_EQ(woken, 2);
}

}  // namespace
}  // namespace skipswarm::node
