// Relayed connections on loopback (ports picked by the kernel): a sender
// reaches a node that only dials out, through the relay it attached to,
// with the pipeline transport's own mutual TLS end to end; when that relay
// goes, the node re-attaches through another and frames flow again.
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/real_clock.h"
#include "gtest/gtest.h"
#include "identity/identity.h"
#include "identity/tls_credentials.h"
#include "node/transport/grpc_transport.h"
#include "node/transport/node_server.h"
#include "node/transport/relay/relay_client.h"
#include "node/transport/relay/relay_service.h"
#include "node/transport/relay/relay_test_util.h"
#include "node/transport/test_util.h"
#include "proto/version.h"

namespace skipswarm::node {
namespace {

using ::skipswarm::node::testutil::AckWaiter;
using ::skipswarm::node::testutil::MakeTestFrame;
using ::skipswarm::node::testutil::RelayEnds;
using ::skipswarm::node::testutil::TestRelay;

// What the node behind NAT announced (gossip's role in the daemon).
class Announced {
 public:
  void Set(const RelayChange& change) {
    absl::MutexLock lock(&mu_);
    relays_ = change.relays;
    if (change.recovered_after) recovered_after_ = change.recovered_after;
    ++changes_;
  }
  std::vector<RelayCandidate> relays() {
    absl::MutexLock lock(&mu_);
    return relays_;
  }
  // Waits (bounded) until the announced first relay is `id`.
  bool WaitForFirst(const common::NodeId& id) {
    absl::MutexLock lock(&mu_);
    // Evaluated under mu_, here and by the Condition.
    auto first_is = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !relays_.empty() && relays_.front().id == id;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&first_is), absl::Seconds(20)) || first_is();
  }
  // Waits (bounded) until `n` relays are announced.
  bool WaitForCount(size_t n) {
    absl::MutexLock lock(&mu_);
    auto count_is = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return relays_.size() == n; };
    return mu_.AwaitWithTimeout(absl::Condition(&count_is), absl::Seconds(20)) || count_is();
  }
  std::optional<absl::Duration> recovered_after() {
    absl::MutexLock lock(&mu_);
    return recovered_after_;
  }

 private:
  absl::Mutex mu_;
  std::vector<RelayCandidate> relays_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::Duration> recovered_after_ ABSL_GUARDED_BY(mu_);
  int changes_ ABSL_GUARDED_BY(mu_) = 0;
};

GrpcTransportOptions QuickBackOff() {
  GrpcTransportOptions o;
  o.initial_backoff = absl::Milliseconds(20);
  o.max_backoff = absl::Milliseconds(200);
  return o;
}

// N (behind NAT) records who sent each frame; P retries quickly.
class RelayTest : public ::testing::Test {
 protected:
  RelayTest()
      : clock_(common::RealClock::Create()),
        ends_(clock_.get(),
              [this](const PeerId& from, Frame, AckFn ack) {
                {
                  absl::MutexLock lock(&mu_);
                  froms_.push_back(from);
                }
                ack(absl::OkStatus());
              },
              QuickBackOff()) {}

  // N attaches to `relays` of `candidates` and announces them; P dials
  // through the relays announced.
  void Attach(std::vector<RelayCandidate> candidates, int relays) {
    ends_.Attach([candidates] { return candidates; }, relays,
                 [this](const RelayChange& c) { announced_.Set(c); });
    ends_.DialThrough([this](const common::NodeId&) { return announced_.relays(); });
  }

  absl::Status SendOne(uint64_t mb) {
    AckWaiter ack;
    ends_.p->Send(ends_.n_key->id(),
                  MakeTestFrame({ends_.p_key->id(), ends_.n_key->id()}, 1, 256 << 10, mb),
                  ack.Callback());
    return ack.Wait();
  }
  // Sends until one frame is admitted (a connection broken by a lost relay
  // fails the first sends UNAVAILABLE), at most `tries` times.
  absl::Status SendUntilAdmitted(uint64_t mb, int tries) {
    absl::Status s;
    for (int i = 0; i < tries; ++i) {
      s = SendOne(mb + static_cast<uint64_t>(i));
      if (s.ok()) return s;
      absl::Notification never;
      never.WaitForNotificationWithTimeout(absl::Milliseconds(50));  // the back-off
    }
    return s;
  }
  int FramesFromP() {
    absl::MutexLock lock(&mu_);
    int n = 0;
    for (const PeerId& f : froms_) n += f == ends_.p_key->id() ? 1 : 0;
    return n;
  }

  std::unique_ptr<common::RealClock> clock_;
  Announced announced_;
  absl::Mutex mu_;
  std::vector<PeerId> froms_ ABSL_GUARDED_BY(mu_);
  RelayEnds ends_;  // last: its callbacks use the members above
};

TEST_F(RelayTest, FramesReachAnOutboundOnlyNodeThroughItsRelay) {
  TestRelay r1('1', clock_.get());
  Attach({r1.candidate()}, 1);
  ASSERT_TRUE(announced_.WaitForFirst(r1.key->id()));
  for (uint64_t mb = 0; mb < 5; ++mb) EXPECT_TRUE(SendOne(mb).ok()) << mb;
  // N saw P itself (TLS end to end through the relay), not the relay.
  EXPECT_EQ(FramesFromP(), 5);
  EXPECT_GE(r1.service->stats().circuits_opened, 1);
  EXPECT_GT(r1.service->stats().bytes_relayed, 5 * (256 << 10));
  EXPECT_EQ(ends_.dialer->stats().circuits, r1.service->stats().circuits_opened);
}

TEST_F(RelayTest, ALostRelayIsReplacedAndFramesFlowAgain) {
  TestRelay r1('1', clock_.get());
  TestRelay r2('2', clock_.get());
  Attach({r1.candidate(), r2.candidate()}, 1);
  ASSERT_TRUE(announced_.WaitForFirst(r1.key->id()));
  ASSERT_TRUE(SendOne(0).ok());
  r1.Kill();
  ASSERT_TRUE(announced_.WaitForFirst(r2.key->id()));
  ASSERT_TRUE(announced_.recovered_after().has_value());
  EXPECT_LT(*announced_.recovered_after(), absl::Seconds(5));
  EXPECT_TRUE(SendUntilAdmitted(10, 50).ok());
  EXPECT_GE(r2.service->stats().circuits_opened, 1);
  EXPECT_EQ(ends_.attacher->stats().losses, 1);
}

// Note [Own relay first]: P relays for N too (its second relay); P's
// connections to N go through its own Relay service, not through R1, which
// N lists first.
TEST_F(RelayTest, ASenderThatRelaysTheTargetCarriesItsOwnConnections) {
  TestRelay r1('1', clock_.get());
  TestRelay own('p', clock_.get());  // P's key: P's own Relay service
  ASSERT_EQ(own.key->id(), ends_.p_key->id());
  Attach({r1.candidate(), own.candidate()}, 2);
  ASSERT_TRUE(announced_.WaitForCount(2));
  ASSERT_EQ(announced_.relays().front().id, r1.key->id());
  for (uint64_t mb = 0; mb < 3; ++mb) EXPECT_TRUE(SendOne(mb).ok()) << mb;
  EXPECT_EQ(FramesFromP(), 3);
  EXPECT_GE(own.service->stats().circuits_opened, 1);
  EXPECT_GT(own.service->stats().bytes_relayed, 3 * (256 << 10));
  EXPECT_EQ(r1.service->stats().circuits_opened, 0);
}

// A circuit's two handlers leave one after the other; a relay shut down in
// between must not cancel the call of the one that already returned (its
// context is freed: "pure virtual method called"). The window is a thread
// wake-up wide, so the test closes circuits and shuts relays down back to
// back several times.
TEST_F(RelayTest, ShutdownRightAfterACircuitEndsIsSafe) {
  for (char seed = 'A'; seed < 'A' + 16; ++seed) {  // not N's or P's key
    TestRelay r(seed, clock_.get());
    Attach({r.candidate()}, 1);
    ASSERT_TRUE(announced_.WaitForFirst(r.key->id()));
    ASSERT_TRUE(SendUntilAdmitted(0, 50).ok());
    ends_.dialer.reset();  // ends P's circuit: both of R's handlers leave
    r.Kill();
    ends_.attacher.reset();
  }
}

TEST_F(RelayTest, ANodeThatIsNotAttachedCannotBeReached) {
  TestRelay r1('1', clock_.get());
  // P is told of a relay N never attached to: the connection fails and the
  // send says retry elsewhere.
  ends_.DialThrough([&](const common::NodeId&) {
    return std::vector<RelayCandidate>{r1.candidate()};
  });
  const absl::Status s = SendOne(0);
  EXPECT_TRUE(IsRetryElsewhere(s)) << s;
  EXPECT_EQ(FramesFromP(), 0);
  EXPECT_GE(ends_.dialer->stats().failed, 1);
}

TEST_F(RelayTest, OnlyTheAttachedNodeMayAcceptItsCircuits) {
  TestRelay r1('1', clock_.get());
  Attach({r1.candidate()}, 1);
  ASSERT_TRUE(announced_.WaitForFirst(r1.key->id()));
  // P tries to accept circuit 1 as if it were N: refused.
  grpc::ChannelArguments args;
  ends_.p_creds->ConfigureChannel(args);
  auto channel = grpc::CreateCustomChannel(r1.candidate().address,
                                           ends_.p_creds->ForChannel(r1.key->id()), args);
  auto stub = proto::Relay::NewStub(channel);
  grpc::ClientContext context;
  auto stream = stub->Accept(&context);
  proto::RelayBytes first;
  first.set_protocol_version(proto::kProtocolVersion);
  first.set_node_id(ends_.n_key->id().Bytes());  // claims to be N
  first.set_circuit(1);
  stream->Write(first);
  stream->WritesDone();
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

}  // namespace
}  // namespace skipswarm::node
