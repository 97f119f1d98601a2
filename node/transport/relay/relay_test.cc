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
#include "identity/test_identity.h"
#include "identity/tls_credentials.h"
#include "node/transport/grpc_transport.h"
#include "node/transport/node_server.h"
#include "node/transport/relay/relay_client.h"
#include "node/transport/relay/relay_service.h"
#include "node/transport/test_util.h"
#include "proto/version.h"

namespace skipswarm::node {
namespace {

using ::skipswarm::identity::Identity;
using ::skipswarm::identity::PeerCredentials;
using ::skipswarm::node::testutil::AckWaiter;
using ::skipswarm::node::testutil::kTestSwarm;
using ::skipswarm::node::testutil::MakeTestFrame;

// A reachable node that relays: a NodeServer with the relay service.
struct Relay {
  std::unique_ptr<Identity> key;
  std::unique_ptr<NodeServer> server;
  std::unique_ptr<RelayService> service;

  Relay(char seed, common::Clock* clock) : key(identity::TestIdentity(seed)) {
    auto creds = PeerCredentials::Create({key.get()}, clock->Now()).value();
    server = std::make_unique<NodeServer>(NodeServerOptions{"127.0.0.1:0"});
    RelayServiceOptions ro;
    ro.self = key->id();
    ro.credentials = creds;
    ro.swarm_id = kTestSwarm;
    service = std::make_unique<RelayService>(ro);
    server->builder()->RegisterService(service.get());
    EXPECT_TRUE(server->Start(creds).ok());
  }
  ~Relay() { Kill(); }  // the server goes before the service it calls
  RelayCandidate candidate() const {
    return {key->id(), "127.0.0.1:" + std::to_string(server->port())};
  }
  void Kill() {
    service->Shutdown();
    server->Shutdown(absl::ZeroDuration());
  }
};

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

class RelayTest : public ::testing::Test {
 protected:
  RelayTest()
      : clock_(common::RealClock::Create()),
        n_key_(identity::TestIdentity('n')),
        p_key_(identity::TestIdentity('p')),
        n_creds_(PeerCredentials::Create({n_key_.get()}, clock_->Now()).value()),
        p_creds_(PeerCredentials::Create({p_key_.get()}, clock_->Now()).value()) {
    // N: a pipeline transport on its own server; nobody is told its address.
    n_server_ = std::make_unique<NodeServer>(NodeServerOptions{"127.0.0.1:0"});
    GrpcTransportOptions no;
    no.self = n_key_->id();
    no.credentials = n_creds_;
    no.swarm_id = kTestSwarm;
    no.serve_on = n_server_->builder();
    n_ = GrpcTransport::Create(no, clock_.get()).value();
    EXPECT_TRUE(n_server_->Start(n_creds_).ok());
    n_->SetFrameHandler([this](const PeerId& from, Frame, AckFn ack) {
      {
        absl::MutexLock lock(&mu_);
        froms_.push_back(from);
      }
      ack(absl::OkStatus());
    });
    // P: sends only.
    GrpcTransportOptions po;
    po.self = p_key_->id();
    po.credentials = p_creds_;
    po.swarm_id = kTestSwarm;
    po.listen_address = "";
    po.initial_backoff = absl::Milliseconds(20);
    po.max_backoff = absl::Milliseconds(200);
    p_ = GrpcTransport::Create(po, clock_.get()).value();
  }
  ~RelayTest() override {
    dialer_.reset();
    p_.reset();
    attacher_.reset();
    n_server_->Shutdown(absl::ZeroDuration());
    n_.reset();
  }

  void Attach(std::vector<RelayCandidate> candidates, int relays) {
    RelayAttacherOptions ao;
    ao.self = n_key_->id();
    ao.credentials = n_creds_;
    ao.swarm_id = kTestSwarm;
    ao.local_address = "127.0.0.1:" + std::to_string(n_server_->port());
    ao.relays = relays;
    attacher_ = std::make_unique<RelayAttacher>(
        ao, clock_.get(), [candidates] { return candidates; },
        [this](const RelayChange& c) { announced_.Set(c); });
    dialer_ = std::make_unique<RelayDialer>(
        RelayDialerOptions{p_key_->id(), p_creds_},
        [this](const common::NodeId&) { return announced_.relays(); });
    p_->SetPeerAddress(n_key_->id(), dialer_->EndpointFor(n_key_->id()).value());
  }

  absl::Status SendOne(uint64_t mb) {
    AckWaiter ack;
    p_->Send(n_key_->id(), MakeTestFrame({p_key_->id(), n_key_->id()}, 1, 256 << 10, mb),
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
    for (const PeerId& f : froms_) n += f == p_key_->id() ? 1 : 0;
    return n;
  }

  std::unique_ptr<common::RealClock> clock_;
  std::unique_ptr<Identity> n_key_, p_key_;
  std::shared_ptr<const PeerCredentials> n_creds_, p_creds_;
  std::unique_ptr<NodeServer> n_server_;
  std::unique_ptr<GrpcTransport> n_, p_;
  Announced announced_;
  std::unique_ptr<RelayAttacher> attacher_;
  std::unique_ptr<RelayDialer> dialer_;
  absl::Mutex mu_;
  std::vector<PeerId> froms_ ABSL_GUARDED_BY(mu_);
};

TEST_F(RelayTest, FramesReachAnOutboundOnlyNodeThroughItsRelay) {
  Relay r1('1', clock_.get());
  Attach({r1.candidate()}, 1);
  ASSERT_TRUE(announced_.WaitForFirst(r1.key->id()));
  for (uint64_t mb = 0; mb < 5; ++mb) EXPECT_TRUE(SendOne(mb).ok()) << mb;
  // N saw P itself (TLS end to end through the relay), not the relay.
  EXPECT_EQ(FramesFromP(), 5);
  EXPECT_GE(r1.service->stats().circuits_opened, 1);
  EXPECT_GT(r1.service->stats().bytes_relayed, 5 * (256 << 10));
  EXPECT_EQ(dialer_->stats().circuits, r1.service->stats().circuits_opened);
}

TEST_F(RelayTest, ALostRelayIsReplacedAndFramesFlowAgain) {
  Relay r1('1', clock_.get());
  Relay r2('2', clock_.get());
  Attach({r1.candidate(), r2.candidate()}, 1);
  ASSERT_TRUE(announced_.WaitForFirst(r1.key->id()));
  ASSERT_TRUE(SendOne(0).ok());
  r1.Kill();
  ASSERT_TRUE(announced_.WaitForFirst(r2.key->id()));
  ASSERT_TRUE(announced_.recovered_after().has_value());
  EXPECT_LT(*announced_.recovered_after(), absl::Seconds(5));
  EXPECT_TRUE(SendUntilAdmitted(10, 50).ok());
  EXPECT_GE(r2.service->stats().circuits_opened, 1);
  EXPECT_EQ(attacher_->stats().losses, 1);
}

// Note [Own relay first]: P relays for N too (its second relay); P's
// connections to N go through its own Relay service, not through R1, which
// N lists first.
TEST_F(RelayTest, ASenderThatRelaysTheTargetCarriesItsOwnConnections) {
  Relay r1('1', clock_.get());
  Relay own('p', clock_.get());  // P's key: P's own Relay service
  ASSERT_EQ(own.key->id(), p_key_->id());
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
    Relay r(seed, clock_.get());
    Attach({r.candidate()}, 1);
    ASSERT_TRUE(announced_.WaitForFirst(r.key->id()));
    ASSERT_TRUE(SendUntilAdmitted(0, 50).ok());
    dialer_.reset();  // ends P's circuit: both of R's handlers leave
    r.Kill();
    attacher_.reset();
  }
}

TEST_F(RelayTest, ANodeThatIsNotAttachedCannotBeReached) {
  Relay r1('1', clock_.get());
  // P is told of a relay N never attached to: the connection fails and the
  // send says retry elsewhere.
  dialer_ = std::make_unique<RelayDialer>(RelayDialerOptions{p_key_->id(), p_creds_},
                                          [&](const common::NodeId&) {
                                            return std::vector<RelayCandidate>{r1.candidate()};
                                          });
  p_->SetPeerAddress(n_key_->id(), dialer_->EndpointFor(n_key_->id()).value());
  const absl::Status s = SendOne(0);
  EXPECT_TRUE(IsRetryElsewhere(s)) << s;
  EXPECT_EQ(FramesFromP(), 0);
  EXPECT_GE(dialer_->stats().failed, 1);
}

TEST_F(RelayTest, OnlyTheAttachedNodeMayAcceptItsCircuits) {
  Relay r1('1', clock_.get());
  Attach({r1.candidate()}, 1);
  ASSERT_TRUE(announced_.WaitForFirst(r1.key->id()));
  // P tries to accept circuit 1 as if it were N: refused.
  grpc::ChannelArguments args;
  p_creds_->ConfigureChannel(args);
  auto channel = grpc::CreateCustomChannel(r1.candidate().address,
                                           p_creds_->ForChannel(r1.key->id()), args);
  auto stub = proto::Relay::NewStub(channel);
  grpc::ClientContext context;
  auto stream = stub->Accept(&context);
  proto::RelayBytes first;
  first.set_protocol_version(proto::kProtocolVersion);
  first.set_node_id(n_key_->id().Bytes());  // claims to be N
  first.set_circuit(1);
  stream->Write(first);
  stream->WritesDone();
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

}  // namespace
}  // namespace skipswarm::node
