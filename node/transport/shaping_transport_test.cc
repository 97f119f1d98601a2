#include "node/transport/shaping_transport.h"

#include <memory>
#include <optional>
#include <vector>

#include "common/sim_clock.h"
#include "gtest/gtest.h"
#include "node/transport/inproc_transport.h"
#include "node/transport/test_util.h"
#include "node/transport/token_bucket.h"

namespace skipswarm::node {
namespace {

using ::skipswarm::node::testutil::kTestSwarm;
using ::skipswarm::node::testutil::MakeTestFrame;

TEST(TokenBucketTest, PacesTransfersBackToBack) {
  TokenBucket bucket(1e6, /*burst_bytes=*/0);
  EXPECT_EQ(bucket.Reserve(absl::ZeroDuration(), 500'000), absl::Milliseconds(500));
  EXPECT_EQ(bucket.Reserve(absl::ZeroDuration(), 500'000), absl::Seconds(1));
  // Idle time is not banked beyond the burst.
  EXPECT_EQ(bucket.Reserve(absl::Seconds(10), 1'000'000), absl::Seconds(11));
  TokenBucket unlimited;
  EXPECT_EQ(unlimited.Reserve(absl::Seconds(2), 1 << 30), absl::Seconds(2));
}

TEST(TokenBucketTest, BurstPassesAtOnce) {
  TokenBucket bucket(1e6, 100'000);
  EXPECT_EQ(bucket.Reserve(absl::ZeroDuration(), 100'000), absl::ZeroDuration());
  EXPECT_EQ(bucket.Reserve(absl::ZeroDuration(), 100'000), absl::Milliseconds(100));
}

class ShapingTransportTest : public ::testing::Test {
 protected:
  ShapingTransportTest()
      : board_(&clock_, SwitchboardOptions{absl::ZeroDuration(), kTestSwarm,
                                           absl::Seconds(60)}),
        a_id_(PeerId::ForName("a")),
        b_id_(PeerId::ForName("b")),
        c_id_(PeerId::ForName("c")) {}

  // Attaches `id` with a handler that records arrival times.
  std::unique_ptr<Transport> Receiver(const PeerId& id) {
    auto t = board_.Attach(id).value();
    t->SetFrameHandler(AdmitWith([this, id](const PeerId&, Frame) {
      arrivals_.emplace_back(id, clock_.SteadyNow());
      return absl::OkStatus();
    }));
    return t;
  }

  Frame To(const PeerId& to, size_t bytes, uint64_t mb = 0) {
    return MakeTestFrame({a_id_, to, a_id_}, 1, bytes, mb);
  }

  common::SimClock clock_;
  Switchboard board_;
  PeerId a_id_, b_id_, c_id_;
  std::vector<std::pair<PeerId, absl::Duration>> arrivals_;
};

// Issue 7's acceptance figure for the shaper.
TEST_F(ShapingTransportTest, TenMegabytesOverTenMegabytesPerSecondFiftyMsLink) {
  ShapingOptions opts;
  opts.default_link = {absl::Milliseconds(50), 10e6};
  ShapingTransport a(board_.Attach(a_id_).value(), &clock_, opts);
  auto b = Receiver(b_id_);
  std::optional<absl::Duration> acked_at;
  a.Send(b_id_, To(b_id_, 10'000'000), [&](absl::Status s) {
    EXPECT_TRUE(s.ok()) << s;
    acked_at = clock_.SteadyNow();
  });
  while (clock_.RunNext()) {
  }
  ASSERT_EQ(arrivals_.size(), 1u);
  const double seconds = absl::ToDoubleSeconds(arrivals_[0].second);
  EXPECT_NEAR(seconds, 1.05, 1.05 * 0.05);
  ASSERT_TRUE(acked_at.has_value());
  EXPECT_EQ(*acked_at - arrivals_[0].second, absl::Milliseconds(50));
}

TEST_F(ShapingTransportTest, PerPeerLinksAreIndependent) {
  ShapingOptions opts;
  opts.burst_bytes = 0;
  ShapingTransport a(board_.Attach(a_id_).value(), &clock_, opts);
  a.SetLink(b_id_, {absl::Milliseconds(10), 1e6});
  a.SetLink(c_id_, {absl::Milliseconds(100), 2e6});
  auto b = Receiver(b_id_);
  auto c = Receiver(c_id_);
  a.Send(b_id_, To(b_id_, 1'000'000), [](absl::Status) {});
  a.Send(c_id_, To(c_id_, 1'000'000), [](absl::Status) {});
  while (clock_.RunNext()) {
  }
  ASSERT_EQ(arrivals_.size(), 2u);
  // Header bytes add a few microseconds on top of the payload's time.
  EXPECT_NEAR(absl::ToDoubleSeconds(arrivals_[0].second), 0.6, 0.001);  // c
  EXPECT_EQ(arrivals_[0].first, c_id_);
  EXPECT_NEAR(absl::ToDoubleSeconds(arrivals_[1].second), 1.01, 0.001);  // b
}

TEST_F(ShapingTransportTest, UplinkIsSharedByAllLinks) {
  ShapingOptions opts;
  opts.burst_bytes = 0;
  opts.uplink_bytes_per_second = MbpsToBytesPerSecond(80);  // 10 MB/s
  ShapingTransport a(board_.Attach(a_id_).value(), &clock_, opts);
  auto b = Receiver(b_id_);
  auto c = Receiver(c_id_);
  a.Send(b_id_, To(b_id_, 5'000'000), [](absl::Status) {});
  a.Send(c_id_, To(c_id_, 5'000'000), [](absl::Status) {});
  while (clock_.RunNext()) {
  }
  ASSERT_EQ(arrivals_.size(), 2u);
  EXPECT_NEAR(absl::ToDoubleSeconds(arrivals_[0].second), 0.5, 0.001);
  EXPECT_NEAR(absl::ToDoubleSeconds(arrivals_[1].second), 1.0, 0.001);
}

TEST_F(ShapingTransportTest, DownlinkCapDelaysDelivery) {
  auto a = board_.Attach(a_id_).value();
  ShapingOptions opts;
  opts.burst_bytes = 0;
  opts.downlink_bytes_per_second = 1e6;
  ShapingTransport b(board_.Attach(b_id_).value(), &clock_, opts);
  b.SetFrameHandler(AdmitWith([&](const PeerId&, Frame) {
    arrivals_.emplace_back(b_id_, clock_.SteadyNow());
    return absl::OkStatus();
  }));
  absl::Status ack = absl::UnknownError("not run");
  a->Send(b_id_, To(b_id_, 2'000'000), [&](absl::Status s) { ack = s; });
  while (clock_.RunNext()) {
  }
  ASSERT_EQ(arrivals_.size(), 1u);
  EXPECT_NEAR(absl::ToDoubleSeconds(arrivals_[0].second), 2.0, 0.001);
  EXPECT_TRUE(ack.ok()) << ack;
}

TEST_F(ShapingTransportTest, PendingSendsFailWhenTheWrapperIsGone) {
  ShapingOptions opts;
  opts.default_link = {absl::Seconds(1), 0};
  auto a = std::make_unique<ShapingTransport>(board_.Attach(a_id_).value(),
                                              &clock_, opts);
  auto b = Receiver(b_id_);
  absl::Status ack;
  a->Send(b_id_, To(b_id_, 10), [&](absl::Status s) { ack = s; });
  a.reset();
  clock_.Advance(absl::Seconds(2));
  EXPECT_EQ(ack.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(arrivals_.empty());
}

}  // namespace
}  // namespace skipswarm::node
