#include "node/transport/inproc_transport.h"

#include <memory>
#include <optional>
#include <vector>

#include "common/sim_clock.h"
#include "gtest/gtest.h"
#include "node/transport/test_util.h"

namespace skipswarm::node {
namespace {

using ::skipswarm::node::testutil::kTestSwarm;
using ::skipswarm::node::testutil::MakeTestFrame;

class InProcessTransportTest : public ::testing::Test {
 protected:
  InProcessTransportTest()
      : board_(&clock_, SwitchboardOptions{absl::Milliseconds(5), kTestSwarm,
                                           absl::Seconds(1)}),
        a_id_(PeerId::ForName("a")),
        b_id_(PeerId::ForName("b")) {
    a_ = board_.Attach(a_id_).value();
    b_ = board_.Attach(b_id_).value();
  }

  Frame ToB(size_t bytes = 100, uint64_t mb = 0) {
    return MakeTestFrame({a_id_, b_id_, a_id_}, 1, bytes, mb);
  }

  common::SimClock clock_;
  Switchboard board_;
  PeerId a_id_, b_id_;
  std::unique_ptr<Transport> a_, b_;
};

TEST_F(InProcessTransportTest, DeliversAfterLatencyAndAcksAfterRoundTrip) {
  std::optional<absl::Duration> received_at;
  PeerId from;
  std::string payload;
  b_->SetFrameHandler(AdmitWith([&](const PeerId& sender, Frame frame) {
    received_at = clock_.SteadyNow();
    from = sender;
    payload = std::string(frame.payload);
    return absl::OkStatus();
  }));
  std::optional<absl::Status> ack;
  std::optional<absl::Duration> acked_at;
  Frame frame = ToB(100);
  const std::string sent(frame.payload);
  a_->Send(b_id_, std::move(frame), [&](absl::Status s) {
    ack = s;
    acked_at = clock_.SteadyNow();
  });
  EXPECT_FALSE(ack.has_value());  // never inline
  clock_.Advance(absl::Milliseconds(20));
  ASSERT_TRUE(received_at.has_value());
  EXPECT_EQ(*received_at, absl::Milliseconds(5));
  EXPECT_EQ(from, a_id_);
  EXPECT_EQ(payload, sent);
  ASSERT_TRUE(ack.has_value());
  EXPECT_TRUE(ack->ok()) << *ack;
  EXPECT_EQ(*acked_at, absl::Milliseconds(10));
}

TEST_F(InProcessTransportTest, HandlerRefusalBecomesTheAck) {
  b_->SetFrameHandler(AdmitWith([](const PeerId&, Frame) {
    return absl::ResourceExhaustedError("no free memory slot");
  }));
  absl::Status ack;
  a_->Send(b_id_, ToB(), [&](absl::Status s) { ack = s; });
  clock_.Advance(absl::Milliseconds(10));
  EXPECT_EQ(ack.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(IsRetryElsewhere(ack));
}

TEST_F(InProcessTransportTest, RejectsInvalidFramesBeforeTheHandler) {
  int handled = 0;
  b_->SetFrameHandler(AdmitWith([&](const PeerId&, Frame) {
    ++handled;
    return absl::OkStatus();
  }));
  Frame wrong_hop = MakeTestFrame({a_id_, b_id_, a_id_}, 0, 10);  // hop 0 = a
  Frame bad_crc = ToB(10, 1);
  bad_crc.header.mutable_tensor()->set_payload_crc32c(7);
  absl::Status ack1, ack2;
  a_->Send(b_id_, std::move(wrong_hop), [&](absl::Status s) { ack1 = s; });
  a_->Send(b_id_, std::move(bad_crc), [&](absl::Status s) { ack2 = s; });
  clock_.Advance(absl::Milliseconds(10));
  EXPECT_EQ(ack1.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ack2.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(handled, 0);
}

TEST_F(InProcessTransportTest, RefusesDuplicates) {
  b_->SetFrameHandler(AdmitWith([](const PeerId&, Frame) { return absl::OkStatus(); }));
  absl::Status first, second;
  a_->Send(b_id_, ToB(10, 4), [&](absl::Status s) { first = s; });
  a_->Send(b_id_, ToB(10, 4), [&](absl::Status s) { second = s; });
  clock_.Advance(absl::Milliseconds(10));
  EXPECT_TRUE(first.ok());
  EXPECT_EQ(second.code(), absl::StatusCode::kAlreadyExists);
}

TEST_F(InProcessTransportTest, UnknownPeerIsUnavailable) {
  absl::Status ack;
  a_->Send(PeerId::ForName("nobody"), ToB(), [&](absl::Status s) { ack = s; });
  clock_.RunDue();
  EXPECT_EQ(ack.code(), absl::StatusCode::kUnavailable);
}

TEST_F(InProcessTransportTest, UnansweredFrameMissesItsDeadline) {
  AckFn held;
  b_->SetFrameHandler([&](const PeerId&, Frame, AckFn ack) { held = std::move(ack); });
  Frame frame = ToB();
  frame.header.set_deadline_ms(200);
  absl::Status ack;
  a_->Send(b_id_, std::move(frame), [&](absl::Status s) { ack = s; });
  clock_.Advance(absl::Milliseconds(199));
  EXPECT_TRUE(ack.ok());
  clock_.Advance(absl::Milliseconds(1));
  EXPECT_EQ(ack.code(), absl::StatusCode::kDeadlineExceeded);
  held(absl::OkStatus());  // a late ack changes nothing
  clock_.Advance(absl::Milliseconds(10));
  EXPECT_EQ(ack.code(), absl::StatusCode::kDeadlineExceeded);
}

TEST_F(InProcessTransportTest, DetachedPeerRaisesFailureAndRefusesFrames) {
  b_->SetFrameHandler(AdmitWith([](const PeerId&, Frame) { return absl::OkStatus(); }));
  std::vector<PeerId> failed;
  a_->SetPeerFailureHandler([&](const PeerId& peer, const absl::Status&) {
    failed.push_back(peer);
  });
  absl::Status first;
  a_->Send(b_id_, ToB(10, 1), [&](absl::Status s) { first = s; });
  clock_.Advance(absl::Milliseconds(10));
  ASSERT_TRUE(first.ok());

  absl::Status in_flight;
  a_->Send(b_id_, ToB(10, 2), [&](absl::Status s) { in_flight = s; });
  b_.reset();  // b dies with a frame on the wire
  clock_.Advance(absl::Milliseconds(20));
  EXPECT_EQ(in_flight.code(), absl::StatusCode::kUnavailable);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0], b_id_);
  EXPECT_EQ(board_.size(), 1u);
}

TEST_F(InProcessTransportTest, AttachingTwiceFails) {
  EXPECT_EQ(board_.Attach(a_id_).status().code(), absl::StatusCode::kAlreadyExists);
}

}  // namespace
}  // namespace skipswarm::node
