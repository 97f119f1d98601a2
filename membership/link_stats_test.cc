#include "membership/link_stats.h"

#include "gtest/gtest.h"

namespace skipswarm::membership {
namespace {

TEST(LinkStatsTest, EwmaStartsAtFirstSample) {
  LinkStats stats(0.5, 0.5);
  const common::NodeId peer = common::NodeId::ForName("p");
  EXPECT_EQ(stats.Rtt(peer), absl::InfiniteDuration());
  stats.ObserveRtt(peer, absl::Milliseconds(10), absl::UnixEpoch());
  stats.ObserveRtt(peer, absl::Milliseconds(20), absl::UnixEpoch());
  EXPECT_EQ(stats.Rtt(peer), absl::Milliseconds(15));
  stats.ObserveTransfer(peer, 100, absl::ZeroDuration(), absl::UnixEpoch());
  EXPECT_EQ(stats.BytesPerSecond(peer), 0);
  stats.ObserveTransfer(peer, 100, absl::Seconds(1), absl::UnixEpoch());
  EXPECT_EQ(stats.BytesPerSecond(peer), 100);
  EXPECT_EQ(stats.Samples(common::NodeId::ForName("me")).size(), 1u);
}

TEST(LinkStatsTest, ThroughputHasItsOwnTimeAndRestartsAfterAPause) {
  LinkStats stats(0.5, 0.5, /*throughput_restart_after=*/absl::Minutes(1));
  const common::NodeId me = common::NodeId::ForName("me");
  const common::NodeId peer = common::NodeId::ForName("p");
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  stats.ObserveTransfer(peer, 100, absl::Seconds(1), t0);
  stats.ObserveTransfer(peer, 300, absl::Seconds(1), t0 + absl::Seconds(30));
  EXPECT_EQ(stats.BytesPerSecond(peer), 200);  // averaged: 30 s apart
  stats.ObserveRtt(peer, absl::Milliseconds(10), t0 + absl::Seconds(80));
  std::vector<proto::LinkSample> samples = stats.Samples(me);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].measured_at_unix_ms(), absl::ToUnixMillis(t0 + absl::Seconds(80)));
  EXPECT_EQ(samples[0].throughput_measured_at_unix_ms(),
            absl::ToUnixMillis(t0 + absl::Seconds(30)));
  // 61 s after the last throughput sample (pings in between): a new average.
  stats.ObserveTransfer(peer, 5000, absl::Seconds(1), t0 + absl::Seconds(91));
  EXPECT_EQ(stats.BytesPerSecond(peer), 5000);
  // Without a throughput, no throughput time.
  stats.ObserveRtt(common::NodeId::ForName("q"), absl::Milliseconds(10), t0);
  for (const proto::LinkSample& s : stats.Samples(me)) {
    EXPECT_EQ(s.throughput_measured_at_unix_ms() == 0, s.bytes_per_second() == 0);
  }
}

}  // namespace
}  // namespace skipswarm::membership
