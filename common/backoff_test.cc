#include "common/backoff.h"

#include "gtest/gtest.h"

namespace skipswarm::common {
namespace {

TEST(BackoffTest, DelaysGrowToTheCapWithJitterAndResetStartsOver) {
  Backoff backoff(BackoffOptions{}, 7);
  absl::Duration total;
  absl::Duration last;
  for (int i = 0; i < 20; ++i) {
    last = backoff.Next();
    EXPECT_GT(last, absl::ZeroDuration());
    EXPECT_LE(last, absl::Seconds(10));
    total += last;
  }
  EXPECT_GE(last, absl::Seconds(5));  // at the cap, jitter <= 50%
  EXPECT_GT(total, absl::Seconds(60));
  backoff.Reset();
  EXPECT_LE(backoff.Next(), absl::Milliseconds(100));
}

TEST(BackoffTest, SameSeedSameDelaysOtherSeedOthers) {
  Backoff a(BackoffOptions{}, 1), b(BackoffOptions{}, 1), c(BackoffOptions{}, 2);
  bool differ = false;
  for (int i = 0; i < 5; ++i) {
    const absl::Duration da = a.Next();
    EXPECT_EQ(da, b.Next());
    differ |= da != c.Next();
  }
  EXPECT_TRUE(differ);
}

TEST(LogLimiterTest, OneLinePerIntervalCountingTheHeldBack) {
  LogLimiter limit(absl::Seconds(10));
  int64_t held = -1;
  EXPECT_TRUE(limit.Allow(absl::Seconds(0), &held));
  EXPECT_EQ(held, 0);
  for (int i = 1; i < 100; ++i) EXPECT_FALSE(limit.Allow(absl::Milliseconds(i), &held));
  EXPECT_TRUE(limit.Allow(absl::Seconds(10), &held));
  EXPECT_EQ(held, 99);
}

TEST(LogLimiterTest, BurstLetsTheFirstLinesThroughThenPaces) {
  LogLimiter limit(absl::Seconds(10), /*burst=*/3);
  int64_t held = -1;
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(limit.Allow(absl::Milliseconds(i), &held));
    EXPECT_EQ(held, 0);
  }
  for (int i = 3; i < 50; ++i) EXPECT_FALSE(limit.Allow(absl::Milliseconds(i), &held));
  limit.Hold();
  EXPECT_TRUE(limit.Allow(absl::Seconds(10) + absl::Milliseconds(2), &held));
  EXPECT_EQ(held, 48);
  EXPECT_FALSE(limit.Allow(absl::Seconds(11), nullptr));
}

}  // namespace
}  // namespace skipswarm::common
