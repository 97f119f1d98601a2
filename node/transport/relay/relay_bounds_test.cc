// What the relay holds is bounded (Note [Relay memory] in relay_service.h):
// oversized openings and messages are refused, and a Connect that gives up
// takes its queued call with it. Raw Relay streams over loopback (ports
// picked by the kernel, mutual TLS): N attaches and accepts by hand, A
// opens circuits to it.
#include <memory>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/strings/match.h"
#include "common/real_clock.h"
#include "gtest/gtest.h"
#include "node/transport/relay/relay.grpc.pb.h"
#include "node/transport/relay/relay_service.h"
#include "node/transport/relay/relay_test_util.h"
#include "node/transport/test_util.h"

namespace skipswarm::node {
namespace {

using ::skipswarm::node::testutil::RelayData;
using ::skipswarm::node::testutil::RelayParty;
using ::skipswarm::node::testutil::TestRelay;
using BytesStream = grpc::ClientReaderWriter<proto::RelayBytes, proto::RelayBytes>;

// Connects that give up on a silent N: far more calls than its window
// takes, so the relay's Attach handler ends up blocked writing them.
constexpr int kGivenUp = 40;

class RelayBoundsTest : public ::testing::Test {
 protected:
  void Start(RelayServiceOptions ro = RelayServiceOptions()) {
    relay_ = std::make_unique<TestRelay>('r', clock_.get(), ro);
    n_ = std::make_unique<RelayParty>('n', clock_.get(), relay_->candidate(), relay_->key->id());
    a_ = std::make_unique<RelayParty>('a', clock_.get(), relay_->candidate(), relay_->key->id());
  }
  void TearDown() override {
    if (relay_ != nullptr) relay_->Kill();
  }
  // N attaches; false when the relay refused.
  bool Attach(const proto::RelayAttachRequest& request) {
    calls_ = n_->stub->Attach(&attach_context_, request);
    proto::RelayCall attached;
    return calls_->Read(&attached);
  }
  // A opens a Connect to N with `first` (A's opening, target N).
  std::unique_ptr<BytesStream> Connect(grpc::ClientContext* context, proto::RelayBytes first) {
    std::unique_ptr<BytesStream> s = a_->stub->Connect(context);
    EXPECT_TRUE(s->Write(first));
    return s;
  }
  // A's circuit to N (attached), accepted by N and spliced: `connect` is
  // A's side, `accept` N's.
  void Splice(grpc::ClientContext* connect_context, grpc::ClientContext* accept_context,
              std::unique_ptr<BytesStream>* connect, std::unique_ptr<BytesStream>* accept) {
    *connect = Connect(connect_context, Opening());
    proto::RelayCall call;
    do {
      ASSERT_TRUE(calls_->Read(&call));
    } while (call.circuit() == 0);  // heartbeats
    *accept = n_->stub->Accept(accept_context);
    proto::RelayBytes first = n_->Opening();
    first.set_circuit(call.circuit());
    ASSERT_TRUE((*accept)->Write(first));
    proto::RelayBytes spliced;
    ASSERT_TRUE((*connect)->Read(&spliced));
  }
  proto::RelayBytes Opening() const {
    proto::RelayBytes first = a_->Opening();
    first.set_target(n_->key->id().Bytes());
    return first;
  }
  // The relay (no heartbeats, Accepts awaited 50 ms, 2 circuits per node)
  // with N attached on a channel whose window takes a few calls at most,
  // and kGivenUp Connects from A that N never accepts or reads.
  void StartWithASilentN();
  // Reads until the relay ends `s`; its status.
  static grpc::Status Ended(BytesStream* s) {
    proto::RelayBytes m;
    while (s->Read(&m)) {
    }
    return s->Finish();
  }

  std::unique_ptr<common::RealClock> clock_ = common::RealClock::Create();
  std::unique_ptr<TestRelay> relay_;
  std::unique_ptr<RelayParty> n_, a_;
  grpc::ClientContext attach_context_;
  std::unique_ptr<grpc::ClientReader<proto::RelayCall>> calls_;
};

void RelayBoundsTest::StartWithASilentN() {
  RelayServiceOptions ro;
  ro.heartbeat = absl::Hours(1);
  ro.accept_timeout = absl::Milliseconds(50);
  ro.max_circuits_per_node = 2;
  Start(ro);
  grpc::ChannelArguments args;
  n_->creds->ConfigureChannel(args);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 1);
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  n_->stub = proto::Relay::NewStub(grpc::CreateCustomChannel(
      relay_->candidate().address, n_->creds->ForChannel(relay_->key->id()), args));
  ASSERT_TRUE(Attach(n_->AttachRequest()));
  for (int i = 0; i < kGivenUp; ++i) {
    grpc::ClientContext context;
    std::unique_ptr<BytesStream> connect = Connect(&context, Opening());
    const grpc::Status s = Ended(connect.get());
    ASSERT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  }
}

TEST_F(RelayBoundsTest, AMessageOverTheLimitEndsItsCircuit) {
  Start();
  ASSERT_TRUE(Attach(n_->AttachRequest()));
  grpc::ClientContext connect_context, accept_context;
  std::unique_ptr<BytesStream> connect, accept;
  ASSERT_NO_FATAL_FAILURE(Splice(&connect_context, &accept_context, &connect, &accept));
  proto::RelayBytes m;
  // What Splice writes at most goes through.
  ASSERT_TRUE(connect->Write(RelayData(kSpliceChunkBytes)));
  ASSERT_TRUE(accept->Read(&m));
  EXPECT_EQ(m.data().size(), kSpliceChunkBytes);
  // More ends the circuit, unforwarded.
  connect->Write(RelayData(kRelayMaxMessageBytes));
  const bool forwarded = accept->Read(&m);
  EXPECT_FALSE(forwarded) << "forwarded " << m.data().size() << " bytes";
  if (forwarded) connect_context.TryCancel();  // the test ends either way
  const grpc::Status refused = Ended(connect.get());
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << refused.error_message();
  EXPECT_TRUE(absl::StrContains(refused.error_message(), "more than the"))
      << refused.error_message();
  accept->Finish();
  EXPECT_EQ(relay_->service->stats().oversized, 1);
  EXPECT_EQ(relay_->service->stats().bytes_relayed, static_cast<int64_t>(kSpliceChunkBytes));
  attach_context_.TryCancel();
  calls_->Finish();
}

TEST_F(RelayBoundsTest, OversizedOpeningsAreRefused) {
  Start();
  // An attach request is held for the stream's life: a large one (unknown
  // fields, which the relay would keep) is refused.
  proto::RelayAttachRequest big = n_->AttachRequest();
  big.GetReflection()->MutableUnknownFields(&big)->AddLengthDelimited(
      99, std::string(kRelayMaxOpeningBytes, 'x'));
  const bool big_attached = Attach(big);
  EXPECT_FALSE(big_attached);
  if (big_attached) attach_context_.TryCancel();  // the test goes on either way
  const grpc::Status attach = calls_->Finish();
  EXPECT_EQ(attach.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << attach.error_message();
  // So is a Connect's opening with data (kept for the circuit's life).
  grpc::ClientContext again;
  calls_ = n_->stub->Attach(&again, n_->AttachRequest());
  proto::RelayCall attached;
  ASSERT_TRUE(calls_->Read(&attached));
  proto::RelayBytes opening = Opening();
  opening.set_data(std::string(kRelayMaxOpeningBytes, 'x'));
  grpc::ClientContext connect_context;
  std::unique_ptr<BytesStream> connect = Connect(&connect_context, opening);
  const grpc::Status refused = Ended(connect.get());
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << refused.error_message();
  EXPECT_EQ(relay_->service->stats().oversized, 2);
  again.TryCancel();
  calls_->Finish();
}

// A Connect that times out must not leave its call queued behind the
// blocked Attach writer.
TEST_F(RelayBoundsTest, AConnectThatGivesUpTakesItsQueuedCallWithIt) {
  StartWithASilentN();
  // Not one queued call per Connect ever made.
  EXPECT_LE(relay_->service->stats().queued_calls, 2);
  attach_context_.TryCancel();
  calls_->Finish();
}

// N attaches again (a fresh stream, as a node does when it thinks its
// relay silent): the stream it replaces ends, so its handler, blocked
// writing, does not stay behind with its thread and calls.
TEST_F(RelayBoundsTest, AReattachEndsTheStreamItReplaces) {
  StartWithASilentN();
  EXPECT_EQ(relay_->service->stats().attach_handlers, 1);
  grpc::ClientContext again;
  std::unique_ptr<grpc::ClientReader<proto::RelayCall>> fresh =
      n_->stub->Attach(&again, n_->AttachRequest());
  proto::RelayCall attached;
  ASSERT_TRUE(fresh->Read(&attached));
  const absl::Duration deadline = clock_->SteadyNow() + absl::Seconds(20);
  while (relay_->service->stats().attach_handlers > 1 && clock_->SteadyNow() < deadline) {
    std::this_thread::yield();
  }
  EXPECT_EQ(relay_->service->stats().attach_handlers, 1);
  EXPECT_EQ(relay_->service->stats().attached, 1);
  attach_context_.TryCancel();
  calls_->Finish();
  again.TryCancel();
  fresh->Finish();
}

// The circuits a target holds stay counted when it detaches: another node
// attaching in its slot may not open A C more (before, the count went
// with the attachment, so detaching and attaching again reset it).
TEST_F(RelayBoundsTest, CircuitsStayCountedWhenTheirTargetDetaches) {
  RelayServiceOptions ro;
  ro.max_attached = 1;
  ro.max_circuits_per_node = 1;
  ro.heartbeat = absl::Milliseconds(10);  // the detach is noticed soon
  ro.accept_timeout = absl::Milliseconds(50);
  Start(ro);
  ASSERT_TRUE(Attach(n_->AttachRequest()));
  grpc::ClientContext connect_context, accept_context;
  std::unique_ptr<BytesStream> connect, accept;
  ASSERT_NO_FATAL_FAILURE(Splice(&connect_context, &accept_context, &connect, &accept));
  // N detaches; its circuit stays up.
  attach_context_.TryCancel();
  calls_->Finish();
  const absl::Duration deadline = clock_->SteadyNow() + absl::Seconds(20);
  while (relay_->service->stats().attached != 0 && clock_->SteadyNow() < deadline) {
    std::this_thread::yield();
  }
  ASSERT_EQ(relay_->service->stats().attached, 0);
  // M takes the slot; a circuit to it would be the second open.
  RelayParty m('m', clock_.get(), relay_->candidate(), relay_->key->id());
  grpc::ClientContext m_context;
  std::unique_ptr<grpc::ClientReader<proto::RelayCall>> m_calls =
      m.stub->Attach(&m_context, m.AttachRequest());
  proto::RelayCall attached;
  ASSERT_TRUE(m_calls->Read(&attached));
  proto::RelayBytes to_m = a_->Opening();
  to_m.set_target(m.key->id().Bytes());
  grpc::ClientContext second_context;
  std::unique_ptr<BytesStream> second = Connect(&second_context, to_m);
  const grpc::Status refused = Ended(second.get());
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << refused.error_message();
  EXPECT_TRUE(absl::StrContains(refused.error_message(), "1 circuits open"))
      << refused.error_message();
  connect_context.TryCancel();
  accept_context.TryCancel();
  connect->Finish();
  accept->Finish();
  m_context.TryCancel();
  m_calls->Finish();
}

}  // namespace
}  // namespace skipswarm::node
