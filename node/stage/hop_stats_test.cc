#include "node/stage/hop_stats.h"

#include "gtest/gtest.h"

namespace skipswarm::node {
namespace {

using common::NodeId;

TEST(HopStatsTest, DeadlineStartsAtInitialThenAdaptsWithinBounds) {
  HopStats stats({.initial = absl::Seconds(10), .min = absl::Seconds(1), .factor = 4,
                  .quantile = 0.95, .window = 20, .min_samples = 4});
  const NodeId a = NodeId::ForName("a");
  EXPECT_EQ(stats.Deadline(a), absl::Seconds(10));
  for (int i = 0; i < 3; ++i) stats.RecordAck(a, absl::Milliseconds(500));
  EXPECT_EQ(stats.Deadline(a), absl::Seconds(10)) << "too few samples";
  stats.RecordAck(a, absl::Milliseconds(500));
  EXPECT_EQ(stats.Deadline(a), absl::Seconds(2));
  // Fast hops: the floor.
  for (int i = 0; i < 20; ++i) stats.RecordAck(a, absl::Milliseconds(2));
  EXPECT_EQ(stats.Deadline(a), absl::Seconds(1));
  // Slow hops: capped at the initial deadline.
  for (int i = 0; i < 20; ++i) stats.RecordAck(a, absl::Seconds(5));
  EXPECT_EQ(stats.Deadline(a), absl::Seconds(10));
  // Another peer is unaffected.
  EXPECT_EQ(stats.Deadline(NodeId::ForName("b")), absl::Seconds(10));
}

TEST(HopStatsTest, QuantileIgnoresRareOutliers) {
  HopStats stats({.initial = absl::Seconds(60), .min = absl::Milliseconds(1), .factor = 2,
                  .quantile = 0.9, .window = 100, .min_samples = 1});
  const NodeId a = NodeId::ForName("a");
  for (int i = 0; i < 95; ++i) stats.RecordAck(a, absl::Milliseconds(100));
  for (int i = 0; i < 5; ++i) stats.RecordAck(a, absl::Seconds(20));
  EXPECT_EQ(stats.Deadline(a), absl::Milliseconds(200));
}

TEST(HopStatsTest, HistogramAndTraffic) {
  HopStats stats({});
  const NodeId a = NodeId::ForName("a");
  stats.RecordAck(a, absl::Microseconds(500));
  stats.RecordAck(a, absl::Milliseconds(20));
  stats.RecordAck(a, absl::Seconds(100));
  HopHistogram h = stats.Histogram();
  ASSERT_EQ(h.bounds_s.size(), h.cumulative.size());
  EXPECT_EQ(h.count, 3);
  EXPECT_EQ(h.cumulative.front(), 1);  // <= 1 ms
  EXPECT_EQ(h.cumulative.back(), 2);   // the 100 s ack is only in +Inf
  EXPECT_NEAR(h.sum_s, 100.0205, 1e-9);
  stats.RecordSent(a, 100);
  stats.RecordSent(a, 50);
  stats.RecordReceived(a, 7);
  const PeerTraffic t = stats.Traffic().at(a);
  EXPECT_EQ(t.bytes_sent, 150);
  EXPECT_EQ(t.frames_sent, 2);
  EXPECT_EQ(t.bytes_received, 7);
}

}  // namespace
}  // namespace skipswarm::node
