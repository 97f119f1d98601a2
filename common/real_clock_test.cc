#include "common/real_clock.h"

#include <vector>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace skipswarm::common {
namespace {

using ::testing::ElementsAre;

// These tests wait on notifications, never on fixed sleeps: they finish as
// soon as the timer thread has done its work.

TEST(RealClockTest, SteadyTimeNeverDecreases) {
  auto clock = RealClock::Create();
  absl::Duration a = clock->SteadyNow();
  absl::Duration b = clock->SteadyNow();
  EXPECT_LE(a, b);
}

TEST(RealClockTest, RunsTimersInDeadlineOrder) {
  auto clock = RealClock::Create();
  absl::Mutex mu;
  std::vector<int> order;
  absl::Notification done;
  absl::Duration base = clock->SteadyNow();
  clock->RunAt(base + absl::Milliseconds(20), [&] {
    absl::MutexLock l(&mu);
    order.push_back(2);
    done.Notify();
  });
  clock->RunAt(base + absl::Milliseconds(1), [&] {
    absl::MutexLock l(&mu);
    order.push_back(1);
  });
  done.WaitForNotification();
  absl::MutexLock l(&mu);
  EXPECT_THAT(order, ElementsAre(1, 2));
}

TEST(RealClockTest, FiresNoEarlierThanDeadline) {
  auto clock = RealClock::Create();
  absl::Notification done;
  absl::Duration deadline = clock->SteadyNow() + absl::Milliseconds(10);
  absl::Duration fired_at;
  clock->RunAt(deadline, [&] {
    fired_at = clock->SteadyNow();
    done.Notify();
  });
  done.WaitForNotification();
  EXPECT_GE(fired_at, deadline);
}

TEST(RealClockTest, CancelledTimerDoesNotRun) {
  auto clock = RealClock::Create();
  bool cancelled_ran = false;
  absl::Notification done;
  TimerId id = clock->RunAfter(absl::Milliseconds(5), [&] { cancelled_ran = true; });
  EXPECT_TRUE(clock->Cancel(id));
  clock->RunAfter(absl::Milliseconds(10), [&] { done.Notify(); });
  done.WaitForNotification();
  EXPECT_FALSE(cancelled_ran);
}

TEST(RealClockTest, CallbackCanScheduleAnotherTimer) {
  auto clock = RealClock::Create();
  absl::Notification done;
  clock->RunAfter(absl::Milliseconds(1), [&] {
    clock->RunAfter(absl::Milliseconds(1), [&] { done.Notify(); });
  });
  done.WaitForNotification();
  SUCCEED();
}

// Regression (Note [Timer thread wake-up]): the timer thread used to sleep
// until the number of pending timers changed, so a timer scheduled while
// another was cancelled (no net change) waited out the whole sleep: 50 ms
// stalls between pipeline hops. Here the sleep is an hour, so every round
// that hits that interleaving would hang; each round schedules a due timer
// and at once cancels a far one while the timer thread sleeps.
TEST(RealClockTest, TimerAddedWhileAnotherIsCancelledRunsWithoutWaitingOutTheSleep) {
  auto clock = RealClock::Create(/*max_sleep=*/absl::Hours(1));
  constexpr int kRounds = 200;
  std::vector<TimerId> far;
  for (int i = 0; i < kRounds; ++i) far.push_back(clock->RunAfter(absl::Hours(2), [] {}));
  for (int i = 0; i < kRounds; ++i) {
    absl::Notification ran;
    clock->RunAfter(absl::ZeroDuration(), [&] { ran.Notify(); });
    ASSERT_TRUE(clock->Cancel(far[i]));
    // A liveness bound, not a timing assertion: it only ends a hung test.
    ASSERT_TRUE(ran.WaitForNotificationWithTimeout(absl::Seconds(20)))
        << "round " << i << ": the due timer waited for the timer thread's sleep";
  }
}

TEST(RealClockTest, DestructorDropsPendingTimers) {
  bool ran = false;
  {
    auto clock = RealClock::Create();
    clock->RunAfter(absl::Hours(1), [&] { ran = true; });
  }
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace skipswarm::common
