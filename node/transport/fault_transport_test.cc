#include "node/transport/fault_transport.h"

#include <memory>
#include <optional>
#include <vector>

#include "common/sim_clock.h"
#include "gtest/gtest.h"
#include "node/transport/inproc_transport.h"
#include "node/transport/test_util.h"

namespace skipswarm::node {
namespace {

using ::skipswarm::node::testutil::kTestSwarm;
using ::skipswarm::node::testutil::MakeTestFrame;

class FaultInjectingTransportTest : public ::testing::Test {
 protected:
  FaultInjectingTransportTest()
      : board_(&clock_, SwitchboardOptions{absl::Milliseconds(1), kTestSwarm,
                                           absl::Seconds(5)}),
        a_id_(PeerId::ForName("a")),
        b_id_(PeerId::ForName("b")) {
    a_ = std::make_unique<FaultInjectingTransport>(board_.Attach(a_id_).value(),
                                                   &clock_, /*seed=*/42,
                                                   absl::Seconds(3));
    b_ = board_.Attach(b_id_).value();
    b_->SetFrameHandler(AdmitWith([this](const PeerId&, Frame) {
      ++b_received_;
      return absl::OkStatus();
    }));
    a_->SetFrameHandler(AdmitWith([this](const PeerId&, Frame) {
      ++a_received_;
      return absl::OkStatus();
    }));
    a_->SetPeerFailureHandler([this](const PeerId& peer, const absl::Status&) {
      failures_.push_back(peer);
    });
  }

  Frame AToB(uint64_t mb) { return MakeTestFrame({a_id_, b_id_, a_id_}, 1, 10, mb); }
  Frame BToA(uint64_t mb) {
    return MakeTestFrame({a_id_, b_id_, a_id_}, 2, 10, mb);  // route[2] == a
  }

  common::SimClock clock_;
  Switchboard board_;
  PeerId a_id_, b_id_;
  std::unique_ptr<FaultInjectingTransport> a_;
  std::unique_ptr<Transport> b_;
  int a_received_ = 0;
  int b_received_ = 0;
  std::vector<PeerId> failures_;
};

TEST_F(FaultInjectingTransportTest, PassesTrafficThroughWhenHealthy) {
  absl::Status ack = absl::UnknownError("not run");
  a_->Send(b_id_, AToB(1), [&](absl::Status s) { ack = s; });
  clock_.Advance(absl::Milliseconds(5));
  EXPECT_TRUE(ack.ok()) << ack;
  EXPECT_EQ(b_received_, 1);
}

TEST_F(FaultInjectingTransportTest, DroppedFrameTimesOutAtItsDeadline) {
  a_->DropNext(b_id_, 1);
  absl::Status dropped, header_deadline, kept;
  a_->Send(b_id_, AToB(1), [&](absl::Status s) { dropped = s; });
  a_->DropNext(b_id_, 1);
  Frame short_deadline = AToB(2);
  short_deadline.header.set_deadline_ms(500);
  a_->Send(b_id_, std::move(short_deadline), [&](absl::Status s) { header_deadline = s; });
  a_->Send(b_id_, AToB(3), [&](absl::Status s) { kept = s; });
  clock_.Advance(absl::Milliseconds(499));
  EXPECT_TRUE(header_deadline.ok());
  clock_.Advance(absl::Milliseconds(1));
  EXPECT_EQ(header_deadline.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(dropped.ok());  // still waiting for the 3 s drop timeout
  clock_.Advance(absl::Seconds(3));
  EXPECT_EQ(dropped.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(kept.ok());
  EXPECT_EQ(b_received_, 1);
  EXPECT_EQ(a_->dropped(), 2);
}

TEST_F(FaultInjectingTransportTest, DropRateIsSeededAndDeterministic) {
  auto run = [&](uint64_t seed) {
    common::SimClock clock;
    Switchboard board(&clock, SwitchboardOptions{});
    FaultInjectingTransport a(board.Attach(PeerId::ForName("a")).value(), &clock, seed);
    auto b = board.Attach(PeerId::ForName("b")).value();
    b->SetFrameHandler(AdmitWith([](const PeerId&, Frame) { return absl::OkStatus(); }));
    a.SetDropRate(0.3);
    for (uint64_t mb = 0; mb < 200; ++mb) {
      a.Send(b->self(), MakeTestFrame({a.self(), b->self(), a.self()}, 1, 1, mb),
             [](absl::Status) {});
    }
    clock.Advance(absl::Seconds(60));
    return a.dropped();
  };
  const int64_t first = run(9);
  EXPECT_EQ(first, run(9));
  EXPECT_GT(first, 30);
  EXPECT_LT(first, 90);
}

TEST_F(FaultInjectingTransportTest, DelayHoldsFramesBack) {
  a_->SetDelay(b_id_, absl::Milliseconds(100));
  a_->Send(b_id_, AToB(1), [](absl::Status) {});
  clock_.Advance(absl::Milliseconds(100));
  EXPECT_EQ(b_received_, 0);
  clock_.Advance(absl::Milliseconds(1));  // + link latency
  EXPECT_EQ(b_received_, 1);
}

TEST_F(FaultInjectingTransportTest, PartitionCutsBothWaysUntilHealed) {
  a_->Partition({b_id_});
  absl::Status out, in;
  a_->Send(b_id_, AToB(1), [&](absl::Status s) { out = s; });
  b_->Send(a_id_, BToA(2), [&](absl::Status s) { in = s; });
  clock_.Advance(absl::Milliseconds(5));
  EXPECT_EQ(out.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(in.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(a_received_ + b_received_, 0);
  ASSERT_EQ(failures_.size(), 1u);
  EXPECT_EQ(failures_[0], b_id_);

  a_->Heal();
  absl::Status healed = absl::UnknownError("not run");
  a_->Send(b_id_, AToB(3), [&](absl::Status s) { healed = s; });
  clock_.Advance(absl::Milliseconds(5));
  EXPECT_TRUE(healed.ok()) << healed;
}

TEST_F(FaultInjectingTransportTest, KilledPeerFailsOnceAndCanBeRevived) {
  a_->KillPeer(b_id_);
  a_->KillPeer(b_id_);  // no second event
  absl::Status ack;
  a_->Send(b_id_, AToB(1), [&](absl::Status s) { ack = s; });
  clock_.Advance(absl::Milliseconds(5));
  EXPECT_EQ(ack.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(ack.message().find("killed"), absl::string_view::npos);
  EXPECT_EQ(failures_.size(), 1u);

  a_->RevivePeer(b_id_);
  absl::Status revived = absl::UnknownError("not run");
  a_->Send(b_id_, AToB(2), [&](absl::Status s) { revived = s; });
  clock_.Advance(absl::Milliseconds(5));
  EXPECT_TRUE(revived.ok()) << revived;
}

}  // namespace
}  // namespace skipswarm::node
