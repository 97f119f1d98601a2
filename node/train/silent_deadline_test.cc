#include "node/train/silent_deadline.h"

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

TEST(SilentDeadlineTest, FactorZeroIsOff) {
  EXPECT_FALSE(SilentDeadline(SilentDeadlineOptions{.factor = 0}).enabled());
}

}  // namespace
}  // namespace skipswarm::node
