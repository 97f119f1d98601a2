#include "membership/suspicion.h"

#include "gtest/gtest.h"

namespace skipswarm::membership {
namespace {

using common::NodeId;

TEST(SuspicionTest, BoundsScaleWithLogOfSwarmSize) {
  const absl::Duration base = absl::Seconds(1);
  SuspicionBounds small = ComputeSuspicionBounds(base, 4, 3, 5);
  EXPECT_EQ(small.min, base);  // log10(5) < 1: never below the base
  EXPECT_EQ(small.max, 4 * base);
  EXPECT_EQ(small.confirmations, 3);
  SuspicionBounds big = ComputeSuspicionBounds(base, 4, 3, 1000);
  EXPECT_EQ(big.min, 3 * base);
  EXPECT_EQ(big.max, 12 * base);
  // Too few members to ever confirm k times: the minimum straight away.
  SuspicionBounds tiny = ComputeSuspicionBounds(base, 4, 3, 4);
  EXPECT_EQ(tiny.confirmations, 0);
  EXPECT_EQ(SuspicionTimeout(tiny, 0), base);
}

TEST(SuspicionTest, TimeoutShrinksOnALogScaleWithConfirmations) {
  SuspicionBounds b{absl::Seconds(1), absl::Seconds(4), 3};
  EXPECT_EQ(SuspicionTimeout(b, 0), absl::Seconds(4));
  // 4 - 3 * log(2) / log(4) = 2.5 s; 4 - 3 * log(3) / log(4) = 1.623 s.
  EXPECT_NEAR(absl::ToDoubleSeconds(SuspicionTimeout(b, 1)), 2.5, 1e-9);
  EXPECT_NEAR(absl::ToDoubleSeconds(SuspicionTimeout(b, 2)), 1.6226, 1e-4);
  EXPECT_EQ(SuspicionTimeout(b, 3), absl::Seconds(1));
  EXPECT_EQ(SuspicionTimeout(b, 10), absl::Seconds(1));
}

TEST(SuspicionTest, OnlyNewIndependentReportersConfirm) {
  const NodeId a = NodeId::ForName("a"), b = NodeId::ForName("b"),
               c = NodeId::ForName("c"), d = NodeId::ForName("d"),
               e = NodeId::ForName("e");
  Suspicion s(a, absl::Seconds(10), {absl::Seconds(1), absl::Seconds(4), 3});
  EXPECT_EQ(s.Deadline(), absl::Seconds(14));
  EXPECT_FALSE(s.Confirm(a));         // the first reporter
  EXPECT_FALSE(s.Confirm(NodeId()));  // unknown reporter
  EXPECT_TRUE(s.Confirm(b));
  EXPECT_FALSE(s.Confirm(b));  // repeated gossip of the same opinion
  EXPECT_EQ(s.confirmations(), 1);
  EXPECT_EQ(s.Deadline(), absl::Seconds(12.5));
  EXPECT_TRUE(s.Confirm(c));
  EXPECT_TRUE(s.Confirm(d));
  EXPECT_FALSE(s.Confirm(e));  // k reached: nothing more to learn
  EXPECT_EQ(s.Deadline(), absl::Seconds(11));
}

TEST(SuspicionTest, ASuspectThatTalksGetsTimeToRefuteButNotForever) {
  const NodeId a = NodeId::ForName("a");
  Suspicion s(a, absl::Seconds(10), {absl::Seconds(1), absl::Seconds(4), 3});
  for (const char* name : {"b", "c", "d"}) s.Confirm(NodeId::ForName(name));
  EXPECT_EQ(s.Deadline(), absl::Seconds(11));  // fully confirmed: the min
  s.HeardFromSuspect(absl::Seconds(10.8));
  EXPECT_EQ(s.Deadline(), absl::Seconds(11.8));  // silent for min since
  s.HeardFromSuspect(absl::Seconds(10.5));       // older news changes nothing
  EXPECT_EQ(s.Deadline(), absl::Seconds(11.8));
  s.HeardFromSuspect(absl::Seconds(13.9));
  EXPECT_EQ(s.Deadline(), absl::Seconds(14));  // capped at start + max
}

}  // namespace
}  // namespace skipswarm::membership
