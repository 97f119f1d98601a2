#include "common/sim_clock.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace skipswarm::common {
namespace {

using ::testing::ElementsAre;

TEST(SimClockTest, StartsAtZeroAndMovesOnlyWhenAdvanced) {
  SimClock clock(absl::FromUnixSeconds(1000));
  EXPECT_EQ(clock.SteadyNow(), absl::ZeroDuration());
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(1000));
  clock.Advance(absl::Seconds(3));
  EXPECT_EQ(clock.SteadyNow(), absl::Seconds(3));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(1003));
}

TEST(SimClockTest, FiresTimersInDeadlineThenSchedulingOrder) {
  SimClock clock;
  std::vector<std::string> fired;
  clock.RunAfter(absl::Seconds(2), [&] { fired.push_back("b"); });
  clock.RunAfter(absl::Seconds(1), [&] { fired.push_back("a"); });
  clock.RunAfter(absl::Seconds(2), [&] { fired.push_back("c"); });
  clock.Advance(absl::Seconds(5));
  EXPECT_THAT(fired, ElementsAre("a", "b", "c"));
}

TEST(SimClockTest, CallbackSeesItsOwnDeadline) {
  SimClock clock;
  absl::Duration seen;
  clock.RunAfter(absl::Milliseconds(1500), [&] { seen = clock.SteadyNow(); });
  clock.Advance(absl::Seconds(10));
  EXPECT_EQ(seen, absl::Milliseconds(1500));
  EXPECT_EQ(clock.SteadyNow(), absl::Seconds(10));
}

TEST(SimClockTest, DoesNotFireBeforeDeadline) {
  SimClock clock;
  bool fired = false;
  clock.RunAfter(absl::Seconds(2), [&] { fired = true; });
  clock.Advance(absl::Milliseconds(1999));
  EXPECT_FALSE(fired);
  clock.Advance(absl::Milliseconds(1));
  EXPECT_TRUE(fired);
}

TEST(SimClockTest, CancelledTimerNeverFires) {
  SimClock clock;
  bool fired = false;
  TimerId id = clock.RunAfter(absl::Seconds(1), [&] { fired = true; });
  EXPECT_TRUE(clock.Cancel(id));
  EXPECT_FALSE(clock.Cancel(id));  // already cancelled
  clock.Advance(absl::Seconds(2));
  EXPECT_FALSE(fired);
  EXPECT_EQ(clock.pending_timers(), 0u);
}

TEST(SimClockTest, CancelAfterFiringReturnsFalse) {
  SimClock clock;
  TimerId id = clock.RunAfter(absl::Seconds(1), [] {});
  clock.Advance(absl::Seconds(1));
  EXPECT_FALSE(clock.Cancel(id));
  EXPECT_FALSE(clock.Cancel(kNoTimer));
}

TEST(SimClockTest, CallbackCanScheduleTimerThatFiresInSameAdvance) {
  SimClock clock;
  std::vector<absl::Duration> fired_at;
  clock.RunAfter(absl::Seconds(1), [&] {
    fired_at.push_back(clock.SteadyNow());
    clock.RunAfter(absl::Seconds(1), [&] { fired_at.push_back(clock.SteadyNow()); });
  });
  clock.Advance(absl::Seconds(3));
  EXPECT_THAT(fired_at, ElementsAre(absl::Seconds(1), absl::Seconds(2)));
}

TEST(SimClockTest, CallbackCanCancelALaterTimer) {
  SimClock clock;
  bool second_fired = false;
  TimerId second = kNoTimer;
  clock.RunAfter(absl::Seconds(1), [&] { EXPECT_TRUE(clock.Cancel(second)); });
  second = clock.RunAfter(absl::Seconds(2), [&] { second_fired = true; });
  clock.Advance(absl::Seconds(3));
  EXPECT_FALSE(second_fired);
}

TEST(SimClockTest, ZeroDelayTimerScheduledInCallbackRunsAfterOthersDueNow) {
  SimClock clock;
  std::vector<int> order;
  clock.RunAfter(absl::Seconds(1), [&] {
    order.push_back(1);
    clock.RunAfter(absl::ZeroDuration(), [&] { order.push_back(3); });
  });
  clock.RunAfter(absl::Seconds(1), [&] { order.push_back(2); });
  clock.Advance(absl::Seconds(1));
  EXPECT_THAT(order, ElementsAre(1, 2, 3));
}

TEST(SimClockTest, RunNextJumpsToNextTimer) {
  SimClock clock;
  int fired = 0;
  clock.RunAfter(absl::Seconds(7), [&] { ++fired; });
  EXPECT_TRUE(clock.RunNext());
  EXPECT_EQ(fired, 1);
  EXPECT_EQ(clock.SteadyNow(), absl::Seconds(7));
  EXPECT_FALSE(clock.RunNext());
  EXPECT_EQ(clock.SteadyNow(), absl::Seconds(7));
}

TEST(SimClockTest, PastDeadlineRunsOnNextAdvanceWithoutMovingTimeBack) {
  SimClock clock;
  clock.Advance(absl::Seconds(5));
  absl::Duration seen;
  clock.RunAt(absl::Seconds(1), [&] { seen = clock.SteadyNow(); });
  clock.RunDue();
  EXPECT_EQ(seen, absl::Seconds(5));
}

}  // namespace
}  // namespace skipswarm::common
