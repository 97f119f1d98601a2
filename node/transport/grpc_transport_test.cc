#include "node/transport/grpc_transport.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/random.h"
#include "common/peer_quota.h"
#include "common/real_clock.h"
#include "common/sim_clock.h"
#include "gtest/gtest.h"
#include "node/transport/frame_validator.h"
#include "node/transport/grpc_streams.h"
#include "node/transport/test_util.h"
#include "proto/health.grpc.pb.h"
#include "proto/pipeline.grpc.pb.h"

namespace skipswarm::node {
namespace {

using ::skipswarm::node::testutil::AckWaiter;
using ::skipswarm::node::testutil::kTestSwarm;
using ::skipswarm::node::testutil::MakeTestFrame;

// Frames a transport's handler admitted, waitable from the test thread.
class Inbox {
 public:
  FrameHandler Handler(absl::Status verdict = absl::OkStatus()) {
    return [this, verdict](const PeerId& from, Frame frame, AckFn ack) {
      {
        absl::MutexLock lock(&mu_);
        froms_.push_back(from);
        frames_.push_back(std::move(frame));
      }
      ack(verdict);
    };
  }
  // Blocks until `n` frames have arrived.
  void WaitFor(size_t n) {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](std::pair<std::vector<Frame>*, size_t>* arg) {
          return arg->first->size() >= arg->second;
        },
        new_arg(n)));
  }
  std::vector<Frame> frames() {
    absl::MutexLock lock(&mu_);
    return frames_;
  }
  std::vector<PeerId> froms() {
    absl::MutexLock lock(&mu_);
    return froms_;
  }

 private:
  std::pair<std::vector<Frame>*, size_t>* new_arg(size_t n) {
    arg_ = {&frames_, n};
    return &arg_;
  }
  absl::Mutex mu_;
  std::vector<Frame> frames_ ABSL_GUARDED_BY(mu_);
  std::vector<PeerId> froms_ ABSL_GUARDED_BY(mu_);
  std::pair<std::vector<Frame>*, size_t> arg_;
};

class GrpcTransportTest : public ::testing::Test {
 protected:
  GrpcTransportTest()
      : clock_(common::RealClock::Create()),
        a_id_(PeerId::ForName("a")),
        b_id_(PeerId::ForName("b")) {
    a_ = Make(a_id_);
    b_ = Make(b_id_);
    a_->SetPeerAddress(b_id_, b_->loopback_address());
    b_->SetPeerAddress(a_id_, a_->loopback_address());
  }

  std::unique_ptr<GrpcTransport> Make(const PeerId& id,
                                      GrpcTransportOptions options = {}) {
    options.self = id;
    options.swarm_id = kTestSwarm;
    // TLS cases: grpc_transport_tls_test.cc.
    if (options.credentials == nullptr) {
      options.credentials = identity::PeerCredentials::Insecure();
    }
    return GrpcTransport::Create(options, clock_.get()).value();
  }

  Frame AToB(size_t bytes, uint64_t mb = 0) {
    return MakeTestFrame({a_id_, b_id_, a_id_}, 1, bytes, mb);
  }

  std::unique_ptr<common::RealClock> clock_;  // outlives the transports
  PeerId a_id_, b_id_;
  std::unique_ptr<GrpcTransport> a_, b_;
};

TEST_F(GrpcTransportTest, CarriesAChunkedFrameAndItsAck) {
  Inbox inbox;
  b_->SetFrameHandler(inbox.Handler());
  Frame frame = AToB((4 << 20) + 123, /*mb=*/9);
  const Frame sent = frame;
  AckWaiter ack;
  a_->Send(b_id_, std::move(frame), ack.Callback());
  EXPECT_TRUE(ack.Wait().ok());
  const std::vector<Frame> frames = inbox.frames();
  ASSERT_EQ(frames.size(), 1u);
  const Frame& got = frames[0];
  EXPECT_EQ(got.header.SerializeAsString(), sent.header.SerializeAsString());
  EXPECT_EQ(got.header.chunk_count(), 5u);
  EXPECT_TRUE(got.payload == sent.payload);
  EXPECT_EQ(inbox.froms()[0], a_id_);
}

TEST_F(GrpcTransportTest, CarriesAnEmptyFrame) {
  Inbox inbox;
  b_->SetFrameHandler(inbox.Handler());
  AckWaiter ack;
  a_->Send(b_id_, AToB(0), ack.Callback());
  EXPECT_TRUE(ack.Wait().ok());
  ASSERT_EQ(inbox.frames().size(), 1u);
  EXPECT_TRUE(inbox.frames()[0].payload.empty());
}

TEST_F(GrpcTransportTest, ReusesOneStreamPerPeer) {
  Inbox inbox;
  b_->SetFrameHandler(inbox.Handler());
  std::vector<AckWaiter> acks(8);
  for (uint64_t mb = 0; mb < acks.size(); ++mb) {
    a_->Send(b_id_, AToB(300'000, mb), acks[mb].Callback());
  }
  for (AckWaiter& ack : acks) EXPECT_TRUE(ack.Wait().ok());
  AckWaiter more;
  a_->Send(b_id_, AToB(10, 100), more.Callback());
  EXPECT_TRUE(more.Wait().ok());
  EXPECT_EQ(a_->stats().streams_opened, 1);
  EXPECT_EQ(b_->stats().streams_accepted, 1);
  EXPECT_EQ(inbox.frames().size(), 9u);
}

TEST_F(GrpcTransportTest, HandlerRefusalReachesTheSender) {
  Inbox inbox;
  b_->SetFrameHandler(inbox.Handler(absl::ResourceExhaustedError("all 2 slots busy")));
  AckWaiter ack;
  a_->Send(b_id_, AToB(1000), ack.Callback());
  absl::Status status = ack.Wait();
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(status.message(), "all 2 slots busy");
  // The refused frame may be offered again once a slot frees.
  b_->SetFrameHandler(inbox.Handler());
  AckWaiter again;
  a_->Send(b_id_, AToB(1000), again.Callback());
  EXPECT_TRUE(again.Wait().ok());
}

TEST_F(GrpcTransportTest, BothDirectionsAtOnce) {
  Inbox at_a, at_b;
  a_->SetFrameHandler(at_a.Handler());
  b_->SetFrameHandler(at_b.Handler());
  constexpr int kFrames = 12;
  std::vector<AckWaiter> a_acks(kFrames), b_acks(kFrames);
  std::thread from_b([&] {
    for (int i = 0; i < kFrames; ++i) {
      // Backward frames: hop 2 of the route is a.
      b_->Send(a_id_,
               MakeTestFrame({a_id_, b_id_, a_id_}, 2, 200'000, i,
                             proto::DIRECTION_BACKWARD),
               b_acks[i].Callback());
      EXPECT_TRUE(b_acks[i].Wait().ok());
    }
  });
  for (int i = 0; i < kFrames; ++i) {
    a_->Send(b_id_, AToB(200'000, i), a_acks[i].Callback());
    EXPECT_TRUE(a_acks[i].Wait().ok());
  }
  from_b.join();
  for (AckWaiter& ack : b_acks) EXPECT_TRUE(ack.Wait().ok());
  EXPECT_EQ(at_a.frames().size(), size_t{kFrames});
  EXPECT_EQ(at_b.frames().size(), size_t{kFrames});
}

TEST_F(GrpcTransportTest, UnansweredFrameMissesItsDeadlineAndTheStreamGoesOn) {
  absl::Mutex mu;
  std::vector<AckFn> held;
  absl::Notification arrived;
  b_->SetFrameHandler([&](const PeerId&, Frame frame, AckFn ack) {
    if (frame.header.mb_id() == 1) {
      absl::MutexLock lock(&mu);
      held.push_back(std::move(ack));
      arrived.Notify();
      return;
    }
    ack(absl::OkStatus());
  });
  Frame slow = AToB(100, 1);
  slow.header.set_deadline_ms(50);
  AckWaiter late;
  a_->Send(b_id_, std::move(slow), late.Callback());
  EXPECT_EQ(late.Wait().code(), absl::StatusCode::kDeadlineExceeded);
  arrived.WaitForNotification();
  {
    absl::MutexLock lock(&mu);
    held[0](absl::OkStatus());  // the late ack is matched and ignored
  }
  AckWaiter next;
  a_->Send(b_id_, AToB(100, 2), next.Callback());
  EXPECT_TRUE(next.Wait().ok());
  EXPECT_EQ(a_->stats().streams_opened, 1);
}

TEST_F(GrpcTransportTest, ReceiverStopsReadingWhileFramesAwaitAdmission) {
  GrpcTransportOptions options;
  options.max_frames_awaiting_admission = 2;
  const PeerId c_id = PeerId::ForName("c");
  auto c = Make(c_id, options);
  a_->SetPeerAddress(c_id, c->loopback_address());
  absl::Mutex mu;
  std::vector<AckFn> held;
  int arrived = 0;
  c->SetFrameHandler([&](const PeerId&, Frame, AckFn ack) {
    absl::MutexLock lock(&mu);
    EXPECT_LT(held.size(), 2u) << "read a frame while 2 awaited admission";
    held.push_back(std::move(ack));
    ++arrived;
  });
  constexpr int kFrames = 5;
  std::vector<AckWaiter> acks(kFrames);
  for (int i = 0; i < kFrames; ++i) {
    a_->Send(c_id, MakeTestFrame({a_id_, c_id, a_id_}, 1, 1000, i), acks[i].Callback());
  }
  for (int released = 0; released < kFrames; ++released) {
    AckFn ack;
    {
      absl::MutexLock lock(&mu);
      mu.Await(absl::Condition(+[](std::vector<AckFn>* h) { return !h->empty(); },
                               &held));
      ack = std::move(held.front());
      held.erase(held.begin());
    }
    ack(absl::OkStatus());
  }
  for (AckWaiter& ack : acks) EXPECT_TRUE(ack.Wait().ok());
  absl::MutexLock lock(&mu);
  EXPECT_EQ(arrived, kFrames);
}

TEST_F(GrpcTransportTest, UnreachablePeerFailsFastAndBacksOff) {
  auto gone = Make(PeerId::ForName("gone"));
  const std::string address = gone->loopback_address();
  gone.reset();
  GrpcTransportOptions options;
  options.initial_backoff = absl::Seconds(30);  // long: the test must not race it
  auto c = Make(PeerId::ForName("c"), options);
  absl::Notification failed;
  c->SetPeerFailureHandler([&](const PeerId& peer, const absl::Status& why) {
    EXPECT_EQ(peer, PeerId::ForName("gone"));
    EXPECT_EQ(why.code(), absl::StatusCode::kUnavailable);
    failed.Notify();
  });
  c->SetPeerAddress(PeerId::ForName("gone"), address);
  const PeerId gone_id = PeerId::ForName("gone");
  AckWaiter first;
  c->Send(gone_id, MakeTestFrame({c->self(), gone_id, c->self()}, 1, 10), first.Callback());
  EXPECT_EQ(first.Wait().code(), absl::StatusCode::kUnavailable);
  failed.WaitForNotification();
  AckWaiter second;
  c->Send(gone_id, MakeTestFrame({c->self(), gone_id, c->self()}, 1, 10, 1),
          second.Callback());
  absl::Status status = second.Wait();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(status.message().find("reconnecting"), absl::string_view::npos) << status;
  EXPECT_EQ(c->stats().streams_opened, 1);
}

TEST_F(GrpcTransportTest, PeerDeathRaisesAFailureEvent) {
  Inbox inbox;
  b_->SetFrameHandler(inbox.Handler());
  // Every stream lost raises one: the send after the death below fails to
  // connect and may raise a second, even after the test body ends (state
  // shared, not on the stack).
  struct Raised {
    std::atomic<bool> once{false};
    absl::Notification failed;
  };
  auto raised = std::make_shared<Raised>();
  absl::Notification& failed = raised->failed;
  a_->SetPeerFailureHandler([raised, b = b_id_](const PeerId& peer, const absl::Status&) {
    EXPECT_EQ(peer, b);
    if (!raised->once.exchange(true)) raised->failed.Notify();
  });
  AckWaiter ack;
  a_->Send(b_id_, AToB(100), ack.Callback());
  ASSERT_TRUE(ack.Wait().ok());
  b_.reset();
  failed.WaitForNotification();
  AckWaiter after;
  a_->Send(b_id_, AToB(100, 1), after.Callback());
  EXPECT_EQ(after.Wait().code(), absl::StatusCode::kUnavailable);
}

TEST_F(GrpcTransportTest, UnknownPeerAndUnsealedFramesAreRefusedLocally) {
  AckWaiter unknown;
  a_->Send(PeerId::ForName("x"), AToB(10), unknown.Callback());
  EXPECT_EQ(unknown.Wait().code(), absl::StatusCode::kUnavailable);
  Frame unsealed = AToB(10);
  unsealed.payload.Append("more");
  AckWaiter bad;
  a_->Send(b_id_, std::move(unsealed), bad.Callback());
  EXPECT_EQ(bad.Wait().code(), absl::StatusCode::kInvalidArgument);
}

// A listening socket that never accepts: connections hang in the backlog,
// so nothing sent to it ever completes.
class BlackHole {
 public:
  BlackHole() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    listen(fd_, 4);
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~BlackHole() { close(fd_); }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_;
  int port_;
};

TEST_F(GrpcTransportTest, FullSendQueueRefusesWithResourceExhausted) {
  BlackHole hole;
  GrpcTransportOptions options;
  options.max_queued_frames_per_peer = 1;
  auto c = Make(PeerId::ForName("c"), options);
  const PeerId stuck = PeerId::ForName("stuck");
  c->SetPeerAddress(stuck, hole.address());
  Frame first = MakeTestFrame({c->self(), stuck, c->self()}, 1, 4 << 20, 1);
  first.header.set_deadline_ms(100);
  AckWaiter first_ack, second_ack;
  c->Send(stuck, std::move(first), first_ack.Callback());
  c->Send(stuck, MakeTestFrame({c->self(), stuck, c->self()}, 1, 10, 2),
          second_ack.Callback());
  EXPECT_EQ(second_ack.Wait().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(first_ack.Wait().code(), absl::StatusCode::kDeadlineExceeded);
  c.reset();  // cancels the stuck stream
}

// Speaks the wire protocol directly, to send what GrpcTransport never would.
class RawStream {
 public:
  RawStream(const std::string& address, const PeerId* from) {
    stub_ = proto::PipelineService::NewStub(
        grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
    if (from != nullptr) context_.AddMetadata(internal::kNodeIdMetadata, from->Hex());
    stream_ = stub_->Stream(&context_);
  }
  void Write(const proto::FrameHeader& header) {
    proto::PipelineMessage m;
    *m.mutable_header() = header;
    const bool written = stream_->Write(m);
    if (!lenient_) {
      ASSERT_TRUE(written);
    }
  }
  void WriteChunk(uint32_t index, std::string data) {
    proto::PipelineMessage m;
    m.mutable_chunk()->set_index(index);
    m.mutable_chunk()->set_data(std::move(data));
    const bool written = stream_->Write(m);
    if (!lenient_) {
      ASSERT_TRUE(written);
    }
  }
  // Writes may fail from now on (the server ends the stream early).
  void SetLenient() { lenient_ = true; }
  void WriteFrame(const Frame& frame) {
    Write(frame.header);
    std::string bytes(frame.payload);
    for (uint32_t i = 0; i * kMaxChunkBytes < bytes.size(); ++i) {
      WriteChunk(i, bytes.substr(i * kMaxChunkBytes, kMaxChunkBytes));
    }
  }
  // Closes the sending side and returns every ack's status, then the
  // stream's final status.
  std::vector<absl::StatusCode> Finish(grpc::Status* final_status) {
    stream_->WritesDone();
    std::vector<absl::StatusCode> codes;
    proto::FrameAck ack;
    while (stream_->Read(&ack)) codes.push_back(static_cast<absl::StatusCode>(ack.code()));
    *final_status = stream_->Finish();
    return codes;
  }

 private:
  std::unique_ptr<proto::PipelineService::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<proto::PipelineMessage, proto::FrameAck>> stream_;
  bool lenient_ = false;
};

TEST_F(GrpcTransportTest, ServerRejectsBadFramesWithClearAcksAndKeepsServing) {
  Inbox inbox;
  b_->SetFrameHandler(inbox.Handler());
  RawStream raw(b_->loopback_address(), &a_id_);

  Frame old_version = AToB(10, 1);
  old_version.header.set_protocol_version(proto::PROTOCOL_VERSION_UNSPECIFIED);
  raw.WriteFrame(old_version);                       // FAILED_PRECONDITION
  Frame foreign = AToB(10, 2);
  foreign.header.set_swarm_id("another swarm");
  raw.WriteFrame(foreign);                           // PERMISSION_DENIED
  raw.WriteFrame(MakeTestFrame({a_id_, a_id_, a_id_}, 1, 10, 3));  // not on route
  Frame huge = AToB(10, 4);
  huge.header.mutable_tensor()->set_payload_bytes(uint64_t{300} << 20);
  huge.header.set_chunk_count(300);
  raw.Write(huge.header);                            // INVALID_ARGUMENT (size)
  Frame disordered = AToB(10, 5);
  raw.Write(disordered.header);
  raw.WriteChunk(1, "0123456789");                   // INVALID_ARGUMENT (index)
  Frame corrupt = AToB(10, 6);
  corrupt.header.mutable_tensor()->set_payload_crc32c(1);
  raw.WriteFrame(corrupt);                           // DATA_LOSS
  raw.WriteFrame(AToB(10, 7));                       // OK
  raw.WriteFrame(AToB(10, 7));                       // ALREADY_EXISTS
  Frame cut = AToB((1 << 20) + 5, 8);
  raw.Write(cut.header);
  raw.WriteChunk(0, std::string(1 << 20, 'x'));      // INVALID_ARGUMENT (cut short)
  raw.WriteFrame(AToB(3 << 20, 9));                  // OK
  raw.Write(AToB(10, 11).header);                    // INVALID_ARGUMENT (ends)

  grpc::Status final_status;
  std::vector<absl::StatusCode> codes = raw.Finish(&final_status);
  EXPECT_TRUE(final_status.ok()) << final_status.error_message();
  using C = absl::StatusCode;
  EXPECT_EQ(codes, (std::vector<C>{C::kFailedPrecondition, C::kPermissionDenied,
                                   C::kInvalidArgument, C::kInvalidArgument,
                                   C::kInvalidArgument, C::kDataLoss, C::kOk,
                                   C::kAlreadyExists, C::kInvalidArgument, C::kOk,
                                   C::kInvalidArgument}));
  ASSERT_EQ(inbox.frames().size(), 2u);
  EXPECT_EQ(inbox.frames()[1].payload.size(), size_t{3} << 20);
  // Each refusal counted once, by reason (the daemon's
  // skipswarm_transport_frames_refused_total).
  EXPECT_EQ(b_->stats().frames_refused,
            (FrameRefusalCounts{/*version=*/1, /*swarm=*/1, /*malformed=*/5, /*checksum=*/1,
                                /*duplicate=*/1, /*quota=*/0, /*other=*/0}));

  // The transport's own traffic is unaffected.
  AckWaiter ack;
  a_->Send(b_id_, AToB(100, 10), ack.Callback());
  EXPECT_TRUE(ack.Wait().ok());
}

// Seeded garbage: random headers (fields drawn around the valid ranges)
// and random chunks. Every header gets exactly one ack, nothing reaches the
// handler unless it is valid, and the server still serves afterwards.
TEST_F(GrpcTransportTest, SurvivesRandomHostileMessages) {
  Inbox inbox;
  b_->SetFrameHandler(inbox.Handler());
  RawStream raw(b_->loopback_address(), &a_id_);
  common::Random rng(20261202);
  int headers = 0;
  for (int i = 0; i < 300; ++i) {
    if (rng.Bernoulli(0.5)) {
      Frame f = AToB(static_cast<size_t>(rng.UniformInt(0, 3000)), 1000 + i);
      proto::FrameHeader& h = f.header;
      switch (rng.UniformInt(0, 7)) {
        case 0: h.set_protocol_version(static_cast<proto::ProtocolVersion>(rng.UniformInt(0, 9))); break;
        case 1: h.set_hop_index(static_cast<uint32_t>(rng.UniformInt(0, 100))); break;
        case 2: h.mutable_tensor()->set_payload_bytes(rng()); break;
        case 3: h.set_chunk_count(static_cast<uint32_t>(rng.UniformInt(0, 1 << 20))); break;
        case 4: h.set_direction(static_cast<proto::Direction>(rng.UniformInt(0, 5))); break;
        case 5: h.mutable_route(0)->set_node_id(std::string(rng.UniformInt(0, 40), 'z')); break;
        case 6: h.set_swarm_id(testutil::TestPayload(8, rng())); break;
        default: break;  // valid header
      }
      raw.Write(h);
      ++headers;
    } else {
      raw.WriteChunk(static_cast<uint32_t>(rng.UniformInt(0, 3)),
                     testutil::TestPayload(static_cast<size_t>(rng.UniformInt(0, 2000)), rng()));
    }
  }
  grpc::Status final_status;
  std::vector<absl::StatusCode> codes = raw.Finish(&final_status);
  EXPECT_TRUE(final_status.ok()) << final_status.error_message();
  EXPECT_EQ(codes.size(), static_cast<size_t>(headers));
  for (const Frame& f : inbox.frames()) {
    EXPECT_TRUE(FrameValidator(ValidatorOptions{b_id_, kTestSwarm}).CheckFrame(f).ok());
  }
  AckWaiter ack;
  a_->Send(b_id_, AToB(100, 1), ack.Callback());
  EXPECT_TRUE(ack.Wait().ok());
}

// Note [Peer quotas]: a stranger's frames and streams are held to its small
// budget at the header, before a payload byte is kept, and a stream that
// goes over it ends; a member's are not.
TEST_F(GrpcTransportTest, AStrangersFramesAndStreamsAreHeldToItsQuota) {
  common::SimClock quota_clock;  // time moves only when the test says
  common::PeerQuotaOptions q;
  q.service = "pipeline";
  q.member = {/*messages_per_second=*/1000, /*message_burst=*/1000,
              /*bytes_per_second=*/1e9, /*byte_burst=*/1e9, /*max_streams=*/4};
  q.stranger = {2, 4, 16 << 10, 64 << 10, 1};
  auto quota = std::make_shared<common::PeerQuota>(q, &quota_clock);
  quota->SetClassifier([this](const PeerId& id) {
    return id == a_id_ ? common::PeerClass::kMember : common::PeerClass::kStranger;
  });
  GrpcTransportOptions options;
  options.quota = quota;
  const PeerId c_id = PeerId::ForName("c");
  auto c = Make(c_id, options);
  Inbox inbox;
  c->SetFrameHandler(inbox.Handler());
  using C = absl::StatusCode;
  const PeerId stranger = PeerId::ForName("stranger");
  {
    // Four messages of burst: the stream's opening and three frames.
    RawStream raw(c->loopback_address(), &stranger);
    for (uint64_t mb = 1; mb <= 3; ++mb) {
      raw.WriteFrame(MakeTestFrame({stranger, c_id, stranger}, 1, 10, mb));
    }
    inbox.WaitFor(3);  // the stream is open on the server: a second is refused
    RawStream second(c->loopback_address(), &stranger);
    grpc::Status second_status;
    EXPECT_TRUE(second.Finish(&second_status).empty());
    EXPECT_EQ(second_status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
        << second_status.error_message();
    raw.SetLenient();
    raw.WriteFrame(MakeTestFrame({stranger, c_id, stranger}, 1, 10, 4));  // over: ends it
    grpc::Status final_status;
    EXPECT_EQ(raw.Finish(&final_status),
              (std::vector<C>{C::kOk, C::kOk, C::kOk, C::kResourceExhausted}));
    EXPECT_EQ(final_status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  }
  // The server lets go of the stream's slot just after its status is sent.
  while (quota->open_streams(stranger) != 0) std::this_thread::yield();
  {
    // No message left: the next stream is refused until the bucket refills.
    RawStream raw(c->loopback_address(), &stranger);
    grpc::Status final_status;
    EXPECT_TRUE(raw.Finish(&final_status).empty());
    EXPECT_EQ(final_status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  }
  quota_clock.Advance(absl::Seconds(1));  // two messages
  {
    // A frame over the stranger's byte burst (64 KiB) is refused whole.
    RawStream raw(c->loopback_address(), &stranger);
    raw.SetLenient();
    raw.Write(MakeTestFrame({stranger, c_id, stranger}, 1, 100 << 10, 5).header);
    grpc::Status final_status;
    EXPECT_EQ(raw.Finish(&final_status), (std::vector<C>{C::kResourceExhausted}));
    EXPECT_EQ(final_status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  }
  EXPECT_EQ(inbox.frames().size(), 3u);

  // The member: 50 frames, all admitted, on the same node at the same time.
  a_->SetPeerAddress(c_id, c->loopback_address());
  for (uint64_t mb = 0; mb < 50; ++mb) {
    AckWaiter ack;
    a_->Send(c_id, MakeTestFrame({a_id_, c_id, a_id_}, 1, 10 << 10, 100 + mb),
             ack.Callback());
    EXPECT_TRUE(ack.Wait().ok());
  }
  EXPECT_EQ(inbox.frames().size(), 53u);

  auto refusals = quota->refusals();
  using R = common::QuotaReason;
  using P = common::PeerClass;
  EXPECT_EQ((refusals[{R::kStreams, P::kStranger}]), 1u);
  EXPECT_EQ((refusals[{R::kMessages, P::kStranger}]), 2u);  // the 4th frame, the 2nd stream
  EXPECT_EQ((refusals[{R::kBytes, P::kStranger}]), 1u);
  EXPECT_EQ(quota->total_refusals(), 4u);
  // The two frames the quota refused (streams are not frames).
  EXPECT_EQ(c->stats().frames_refused[static_cast<size_t>(FrameRefusal::kQuota)], 2u);
}

// Note [Refusal hold]: a stranger refused again within the repeat window
// gets its answer (a refused stream's end, a refused frame's ack) only when
// its bucket would admit it, on the quota's clock.
TEST_F(GrpcTransportTest, AStrangersRepeatedRefusalsAreAnsweredAfterTheHold) {
  common::SimClock quota_clock;
  common::PeerQuotaOptions q;
  q.service = "pipeline";
  q.stranger = {/*messages_per_second=*/2, /*message_burst=*/4, 1e9, 1e9, /*max_streams=*/1};
  q.max_hold = absl::Seconds(1);
  auto quota = std::make_shared<common::PeerQuota>(q, &quota_clock);
  quota->SetClassifier([](const PeerId&) { return common::PeerClass::kStranger; });
  GrpcTransportOptions options;
  options.quota = quota;
  const PeerId c_id = PeerId::ForName("c");
  auto c = Make(c_id, options);
  Inbox inbox;
  c->SetFrameHandler(inbox.Handler());
  using C = absl::StatusCode;
  const PeerId stranger = PeerId::ForName("stranger");
  {
    RawStream raw(c->loopback_address(), &stranger);  // one message
    for (uint64_t mb = 1; mb <= 3; ++mb) {            // three more: the burst
      raw.WriteFrame(MakeTestFrame({stranger, c_id, stranger}, 1, 10, mb));
    }
    inbox.WaitFor(3);
    // Its second stream: the first refusal, answered at once.
    RawStream second(c->loopback_address(), &stranger);
    grpc::Status second_status;
    EXPECT_TRUE(second.Finish(&second_status).empty());
    EXPECT_EQ(second_status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    // A 4th frame: refused again, held until one message refills (0.5 s).
    raw.SetLenient();
    raw.WriteFrame(MakeTestFrame({stranger, c_id, stranger}, 1, 10, 4));
    std::atomic<bool> done{false};
    std::vector<C> codes;
    grpc::Status final_status;
    std::thread finisher([&] {
      codes = raw.Finish(&final_status);
      done = true;
    });
    // The hold's timer is on the clock (held_now() counts the hold a moment
    // before its timer is set; advancing in between would strand it).
    while (quota_clock.pending_timers() == 0) std::this_thread::yield();
    quota_clock.Advance(absl::Seconds(0.4));
    EXPECT_FALSE(done.load());
    quota_clock.Advance(absl::Seconds(0.1));
    finisher.join();
    EXPECT_EQ(codes, (std::vector<C>{C::kOk, C::kOk, C::kOk, C::kResourceExhausted}));
    EXPECT_EQ(final_status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  }
  while (quota->open_streams(stranger) != 0) std::this_thread::yield();
  {
    // The bucket's one message went to nobody; drain it, then a new stream
    // is refused again at once after the last refusal: held 0.5 s.
    ASSERT_TRUE(quota->Admit(stranger, 0).ok());
    RawStream raw(c->loopback_address(), &stranger);
    std::atomic<bool> done{false};
    grpc::Status final_status;
    std::thread finisher([&] {
      raw.Finish(&final_status);
      done = true;
    });
    while (quota_clock.pending_timers() == 0) std::this_thread::yield();
    EXPECT_FALSE(done.load());
    quota_clock.Advance(absl::Seconds(0.5));
    finisher.join();
    EXPECT_EQ(final_status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  }
  EXPECT_EQ(quota->held_refusals(), 2u);
  EXPECT_EQ(inbox.frames().size(), 3u);
}

TEST_F(GrpcTransportTest, StreamWithoutNodeIdIsRefused) {
  RawStream raw(b_->loopback_address(), nullptr);
  grpc::Status final_status;
  std::vector<absl::StatusCode> codes = raw.Finish(&final_status);
  EXPECT_TRUE(codes.empty());
  EXPECT_EQ(final_status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

// Ports are exclusive (gRPC's SO_REUSEPORT off): a second transport on
// b's port fails with an error naming the flag.
TEST_F(GrpcTransportTest, ASecondServerOnTheSamePortFailsNamingTheFlag) {
  GrpcTransportOptions o;
  o.self = PeerId::ForName("c");
  o.swarm_id = kTestSwarm;
  o.credentials = identity::PeerCredentials::Insecure();
  o.listen_address = b_->loopback_address();
  auto second = GrpcTransport::Create(o, clock_.get());
  ASSERT_FALSE(second.ok()) << "two servers listen on " << o.listen_address;
  EXPECT_NE(second.status().message().find("--listen"), std::string::npos) << second.status();
}

TEST_F(GrpcTransportTest, HealthServiceReportsServing) {
  auto stub = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(b_->loopback_address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status status = stub->Check(&context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

// Note [Paused training]: a paused data node answers NOT_SERVING.
TEST_F(GrpcTransportTest, HealthServiceFollowsSetServing) {
  auto stub = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(b_->loopback_address(), grpc::InsecureChannelCredentials()));
  for (bool serving : {false, true}) {
    b_->SetServing(serving);
    grpc::ClientContext context;
    grpc::health::v1::HealthCheckRequest request;
    grpc::health::v1::HealthCheckResponse response;
    grpc::Status status = stub->Check(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.status(), serving ? grpc::health::v1::HealthCheckResponse::SERVING
                                         : grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  }
}

}  // namespace
}  // namespace skipswarm::node
