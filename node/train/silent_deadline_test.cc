#include "node/train/silent_deadline.h"

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

}  // namespace
}  // namespace skipswarm::node
