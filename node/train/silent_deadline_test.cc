#include "node/train/silent_deadline.h"

#include <algorithm>
#include <cmath>

#include "gtest/gtest.h"

namespace skipswarm::node {
namespace {

TEST(SilentDeadlineTest, InitialThenFactorTimesTheSlowestRecentWaitAboveTheFloor) {
  SilentDeadline d(SilentDeadlineOptions{
      .initial = absl::Minutes(5), .floor = absl::Seconds(30), .factor = 4.0});
  EXPECT_TRUE(d.enabled());
  EXPECT_EQ(d.Get(), absl::Minutes(5));
  d.Record(absl::Seconds(1));
  EXPECT_EQ(d.Get(), absl::Seconds(30));  // 4 s is under the floor
  d.Record(absl::Seconds(20));
  d.Record(absl::Seconds(2));
  EXPECT_EQ(d.Get(), absl::Seconds(80));  // the slowest of the recent waits
  // The 20 s wait (second of the three) leaves the window once kSamples - 1
  // later waits are recorded after it.
  for (size_t i = 0; i < SilentDeadline::kSamples - 2; ++i) d.Record(absl::Seconds(10));
  EXPECT_EQ(d.Get(), absl::Seconds(80));
  d.Record(absl::Seconds(10));
  EXPECT_EQ(d.Get(), absl::Seconds(40));
}

// Note [Silent ceiling]: one long wait that completed (a data node whose
// iteration ran long within its stated bound) must not stretch the
// wait for the next member that goes silent past max(initial, floor): the
// slowest-wait rule alone made it 4 x that wait (2 h after a 30 min wait),
// and each wait that completed just under the deadline raised it 4-fold.
TEST(SilentDeadlineTest, NeverAboveTheInitialDeadlineWhateverWaitCompleted) {
  SilentDeadline d(SilentDeadlineOptions{
      .initial = absl::Minutes(5), .floor = absl::Seconds(30), .factor = 4.0});
  d.Record(absl::Seconds(10));
  EXPECT_EQ(d.Get(), absl::Seconds(40));
  d.Record(absl::Minutes(30));  // a long iteration, then arrived
  EXPECT_EQ(d.Get(), absl::Minutes(5));
  // A chain of waits each just under the deadline stays at the ceiling.
  for (int i = 0; i < 8; ++i) d.Record(d.Get() - absl::Milliseconds(1));
  EXPECT_EQ(d.Get(), absl::Minutes(5));
  // Below the ceiling the measured rule is unchanged: 4 x 70 s.
  for (size_t i = 0; i < SilentDeadline::kSamples; ++i) d.Record(absl::Seconds(70));
  EXPECT_EQ(d.Get(), absl::Seconds(280));
  // A floor above the initial value is the ceiling instead.
  SilentDeadline high_floor(SilentDeadlineOptions{
      .initial = absl::Seconds(10), .floor = absl::Minutes(2), .factor = 4.0});
  high_floor.Record(absl::Hours(3));
  EXPECT_EQ(high_floor.Get(), absl::Minutes(2));
}

// Note [Stated bounds]: both rules must have passed; with no statement the
// caller's choice (the hub: never; the daemons: the measured rule).
TEST(StatedDropTimeTest, TheLaterOfTheMeasuredDeadlineAndTwiceTheStatedBound) {
  const absl::Duration measured = absl::Seconds(30);
  EXPECT_EQ(StatedDropTime(measured, StatedBound{absl::Seconds(60), absl::Seconds(10)}, measured),
            absl::Seconds(130));
  EXPECT_EQ(StatedDropTime(measured, StatedBound{absl::Seconds(5), absl::Seconds(10)}, measured),
            measured);
  EXPECT_EQ(StatedDropTime(measured, std::nullopt, absl::InfiniteDuration()),
            absl::InfiniteDuration());
  EXPECT_EQ(StatedDropTime(measured, std::nullopt, measured), measured);
}

// Note [Stated bounds in the daemons]: the bound DataNodeDriver::
// NextIterationBound states, MB deadline x (ceil(M / slots) + 1).
absl::Duration DriverBound(absl::Duration mb_deadline, int mbs, int slots) {
  return mb_deadline * ((mbs + slots - 1) / slots + 1);
}

// With DriverOptions' defaults (120 s start-up deadline, 5 s floor, x4, M =
// 4): the start-up iteration on one memory slot states 120 s x 5 = 10 min,
// the old fixed cap, and one deadline step later (an MB that completed in
// 30 s, or a silent loss counted as the start-up deadline) 480 s x 5 = 40
// min, which that cap cut to a quarter.
TEST(MaxHonestIterationBoundTest, HonestStatementsOfAnyMemorySlotsPassUnderTheCap) {
  const absl::Duration initial = absl::Seconds(120);
  const absl::Duration floor = absl::Seconds(5);
  const double factor = 4.0;
  for (int mbs : {1, 4, 16}) {
    const absl::Duration cap = MaxHonestIterationBound(initial, floor, factor, mbs);
    for (int slots = 1; slots <= mbs + 1; ++slots) {
      // The start-up deadline, the floor, and the largest deadline of a
      // data node whose MBs complete within initial / factor.
      for (absl::Duration d : {initial, floor, initial * factor}) {
        EXPECT_LE(DriverBound(d, mbs, slots), cap) << mbs << " MBs, " << slots << " slots";
      }
    }
    // Tight: one more millisecond of MB deadline on one slot is capped.
    EXPECT_GT(DriverBound(initial * factor + absl::Milliseconds(1), mbs, 1), cap);
  }
  EXPECT_EQ(MaxHonestIterationBound(initial, floor, factor, 4), absl::Minutes(40));
  // A floor above the start-up deadline x factor is the deadline instead.
  EXPECT_EQ(MaxHonestIterationBound(absl::Seconds(1), absl::Seconds(10), 2.0, 1),
            absl::Seconds(10) * 2 * 2);
}

TEST(MaxHonestIterationBoundTest, StaysFiniteWhateverTheSettings) {
  EXPECT_EQ(MaxHonestIterationBound(absl::InfiniteDuration(), absl::Seconds(5), 4.0, 4),
            kMaxStatedBoundCeiling);
  EXPECT_EQ(MaxHonestIterationBound(absl::Hours(1), absl::Seconds(5), 1e300, 1 << 30),
            kMaxStatedBoundCeiling);
  EXPECT_EQ(MaxHonestIterationBound(absl::Seconds(120), absl::Seconds(5), 4.0, 1 << 30),
            kMaxStatedBoundCeiling);
  // No MBs or a factor under 1 (NaN too) count as one MB, factor 1.
  EXPECT_EQ(MaxHonestIterationBound(absl::Seconds(10), absl::Seconds(5), 0.5, 0),
            absl::Seconds(20));
  EXPECT_EQ(MaxHonestIterationBound(absl::Seconds(10), absl::Seconds(5), std::nan(""), 1),
            absl::Seconds(20));
  EXPECT_EQ(MaxHonestIterationBound(-absl::Seconds(10), -absl::Seconds(5), 4.0, 1),
            absl::ZeroDuration());
}

TEST(SilentDeadlineTest, FactorZeroIsOff) {
  EXPECT_FALSE(SilentDeadline(SilentDeadlineOptions{.factor = 0}).enabled());
}

// Note [Stated pace]: the options for the default driver options (f = 4,
// M = 4, min_deadline 5 s) are the struct's defaults.
TEST(StatedPaceTest, OptionsFollowTheDriverOptions) {
  const StatedPaceOptions o = StatedPaceFor(absl::Seconds(5), 4.0, 4);
  EXPECT_EQ(o.factor, 20.0);
  EXPECT_EQ(o.floor, absl::Seconds(25));
  EXPECT_EQ(o.factor, StatedPaceOptions{}.factor);
  EXPECT_EQ(o.floor, StatedPaceOptions{}.floor);
  EXPECT_EQ(StatedPaceFor(absl::Seconds(5), std::nan(""), 0).factor, 2.0);
}

// With no span yet (start-up) a statement counts whole, however large:
// a slow home data node's long first iteration is not cut.
TEST(StatedPaceTest, TheStartUpStatementCountsWhole) {
  StatedPace pace;
  EXPECT_EQ(pace.Limit(absl::Minutes(40), StatedPaceOptions{}), absl::Minutes(40));
  pace.Released(absl::Minutes(40), absl::ZeroDuration());
  // Still no span: released, not yet arrived.
  EXPECT_EQ(pace.Limit(absl::Minutes(40), StatedPaceOptions{}), absl::Minutes(40));
  EXPECT_EQ(pace.Limit(-absl::Seconds(1), StatedPaceOptions{}), absl::ZeroDuration());
}

// A data node whose spans were 5 s and that then states the cap counts as
// stating 20 x 5 s = 100 s (above the 25 s floor and its 25 s statements).
TEST(StatedPaceTest, AFastNodeStatingTheCapCountsAtItsPace) {
  StatedPace pace;
  absl::Duration t = absl::ZeroDuration();
  for (int i = 0; i < 8; ++i) {
    pace.Released(pace.Limit(absl::Seconds(25), StatedPaceOptions{}), t);
    t += absl::Seconds(5);
    pace.Arrived(t);
  }
  EXPECT_EQ(pace.Limit(absl::Minutes(40), StatedPaceOptions{}), absl::Seconds(100));
  // An arrival counts once per release: a repeated message adds no span.
  pace.Arrived(t + absl::Hours(1));
  EXPECT_EQ(pace.Limit(absl::Minutes(40), StatedPaceOptions{}), absl::Seconds(100));
  // Under the pace a statement counts as stated.
  EXPECT_EQ(pace.Limit(absl::Seconds(30), StatedPaceOptions{}), absl::Seconds(30));
  // Dropped: it starts afresh, and its next statement counts whole.
  pace.Forget();
  EXPECT_EQ(pace.Limit(absl::Minutes(40), StatedPaceOptions{}), absl::Minutes(40));
  // factor <= 0: statements count as stated.
  pace.Released(absl::Seconds(25), t);
  pace.Arrived(t + absl::Seconds(5));
  EXPECT_EQ(pace.Limit(absl::Minutes(40), StatedPaceOptions{0.0, absl::Seconds(25)}),
            absl::Minutes(40));
}

// An honest data node (the driver's rule: D = max(min_deadline, f x the
// slowest round trip of the iteration just run), stating D x (M + 1))
// that slows gradually, then at once (its MBs run to their deadline), is
// never cut: each statement is within what its pace allows.
TEST(StatedPaceTest, AnHonestNodeThatSlowsIsNeverCut) {
  const int m = 4;
  const StatedPaceOptions options = StatedPaceFor(absl::Seconds(5), 4.0, m);
  StatedPace pace;
  absl::Duration t = absl::ZeroDuration();
  absl::Duration deadline = absl::Seconds(120);  // initial_deadline
  // Round trips: fast, slowing 1.5x per iteration, then stuck at the deadline.
  absl::Duration trip = absl::Seconds(1);
  for (int i = 0; i < 30; ++i) {
    const absl::Duration stated = deadline * (m + 1);
    ASSERT_EQ(pace.Limit(stated, options), stated) << "iteration " << i;
    pace.Released(stated, t);
    if (i == 20) trip = absl::InfiniteDuration();  // a replica died: MBs time out
    const absl::Duration slowest = std::min(trip, deadline);
    t += slowest * m + absl::Seconds(1);  // m waves, then the reduce
    pace.Arrived(t);
    deadline = std::max(absl::Seconds(5), slowest * 4.0);
    if (i < 20) trip = trip * 1.5;
  }
}

}  // namespace
}  // namespace skipswarm::node
