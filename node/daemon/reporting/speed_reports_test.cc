#include "node/daemon/reporting/speed_reports.h"

#include <map>
#include <vector>

#include "common/sim_clock.h"
#include "gtest/gtest.h"

namespace skipswarm::node {
namespace {

TEST(ComputeSpeedMeterTest, NormalisesByLayersSamplesAndBackwardCost) {
  ComputeSpeedMeter meter({.layers_per_stage = 2, .samples_per_mb = 4, .alpha = 0.5,
                           .republish_change = 0.1,
                           .min_republish_interval = absl::Seconds(10), .min_samples = 2});
  const absl::Duration t0 = absl::Seconds(100);
  EXPECT_EQ(meter.estimate(), 0);
  meter.Observe(/*backward=*/false, absl::Milliseconds(80));  // 80 ms / 8 = 10 ms
  EXPECT_NEAR(meter.estimate(), 0.010, 1e-12);
  EXPECT_FALSE(meter.TakePublishable(t0).has_value()) << "fewer than min_samples";
  meter.Observe(/*backward=*/true, absl::Milliseconds(240));  // 240 / 8 / 1.5 = 20 ms
  EXPECT_NEAR(meter.estimate(), 0.015, 1e-12);                // EWMA, alpha 0.5
  std::optional<double> first = meter.TakePublishable(t0);
  ASSERT_TRUE(first.has_value());
  EXPECT_NEAR(*first, 0.015, 1e-12);
  EXPECT_FALSE(meter.TakePublishable(t0 + absl::Seconds(60)).has_value()) << "unchanged";
  meter.Observe(false, absl::Milliseconds(128));  // 16 ms: estimate 15.5 ms, +3%
  EXPECT_FALSE(meter.TakePublishable(t0 + absl::Seconds(60)).has_value()) << "within 10%";
  meter.Observe(false, absl::Milliseconds(240));  // 30 ms: estimate 22.75 ms, +52%
  EXPECT_FALSE(meter.TakePublishable(t0 + absl::Seconds(5)).has_value())
      << "moved, but published 5 s ago";
  std::optional<double> moved = meter.TakePublishable(t0 + absl::Seconds(10));
  ASSERT_TRUE(moved.has_value());
  EXPECT_NEAR(*moved, 0.02275, 1e-12);
}

TEST(ComputeSpeedMeterTest, IgnoresNonPositiveTimings) {
  ComputeSpeedMeter meter({.layers_per_stage = 1, .samples_per_mb = 1, .min_samples = 1});
  meter.Observe(false, absl::ZeroDuration());
  EXPECT_FALSE(meter.TakePublishable(absl::Seconds(1)).has_value());
}

// A transport whose acks the test delivers.
class HeldAckTransport final : public Transport {
 public:
  PeerId self() const override { return common::NodeId::ForName("self"); }
  void SetFrameHandler(FrameHandler) override {}
  void SetPeerFailureHandler(PeerFailureHandler) override {}
  void SetPeerAddress(const PeerId&, std::string) override {}
  void ForgetPeer(const PeerId&) override {}
  void Send(const PeerId&, Frame, SendDone done) override { held.push_back(std::move(done)); }
  std::vector<SendDone> held;
};

TEST(LinkTimingTransportTest, ReportsBytesAndSendToAckTimeOfOkHopsOnly) {
  common::SimClock clock;
  HeldAckTransport inner;
  struct Hop {
    PeerId peer;
    uint64_t bytes;
    absl::Duration elapsed;
  };
  std::vector<Hop> hops;
  LinkTimingTransport timed(&inner, &clock, [&](const PeerId& p, uint64_t b, absl::Duration t) {
    hops.push_back({p, b, t});
  });
  const PeerId a = common::NodeId::ForName("a"), b = common::NodeId::ForName("b");
  Frame f1;
  f1.payload = absl::Cord(std::string(1000, 'x'));
  Frame f2;
  f2.payload = absl::Cord(std::string(50, 'y'));
  std::vector<absl::Status> acks;
  timed.Send(a, f1, [&](absl::Status s) { acks.push_back(s); });
  clock.Advance(absl::Milliseconds(5));
  timed.Send(b, f2, [&](absl::Status s) { acks.push_back(s); });
  clock.Advance(absl::Milliseconds(20));
  ASSERT_EQ(inner.held.size(), 2u);
  inner.held[0](absl::OkStatus());
  inner.held[1](absl::ResourceExhaustedError("full"));
  ASSERT_EQ(acks.size(), 2u);
  EXPECT_TRUE(acks[0].ok());
  EXPECT_TRUE(absl::IsResourceExhausted(acks[1])) << "the ack passes through unchanged";
  ASSERT_EQ(hops.size(), 1u) << "a refused hop is not a link measurement";
  EXPECT_EQ(hops[0].peer, a);
  EXPECT_EQ(hops[0].bytes, 1000u);
  EXPECT_EQ(hops[0].elapsed, absl::Milliseconds(25));
}

}  // namespace
}  // namespace skipswarm::node
