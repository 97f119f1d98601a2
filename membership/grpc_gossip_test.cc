// GossipService over real gRPC on loopback (port 0): mutual TLS identity
// checks, insecure mode, bootstrap diagnostics, and Membership end to end.
#include "membership/grpc_gossip.h"

#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>

#include "absl/synchronization/notification.h"
#include "common/real_clock.h"
#include "gtest/gtest.h"
#include "membership/bootstrap_diagnostics.h"
#include "membership/membership.h"
#include "proto/version.h"

namespace skipswarm::membership {
namespace {

// Answers every call with an ack from `id` and remembers who called.
class FakeHandler : public GossipHandler {
 public:
  explicit FakeHandler(common::NodeId id) : id_(id) {}
  void HandlePing(const PeerInfo& from, const proto::PingRequest& req,
                  AckCallback reply) override {
    common::NodeId id;
    {
      absl::MutexLock lock(&mu_);
      last_peer_ = from.authenticated_id;
      id = id_;
    }
    proto::Ack ack;
    ack.set_from(id.Bytes());
    ack.set_seq(req.seq());
    reply(ack);
  }
  void HandlePingReq(const PeerInfo& from, const proto::PingRequest& req,
                     AckCallback reply) override {
    HandlePing(from, req, std::move(reply));
  }
  void HandlePushPull(const PeerInfo&, const proto::PushPullRequest&,
                      PushPullCallback reply) override {
    reply(absl::FailedPreconditionError("swarm id mismatch: other swarm"));
  }
  common::NodeId last_peer() {
    absl::MutexLock lock(&mu_);
    return last_peer_;
  }
  // While calls may arrive (the server's threads read it).
  void set_id(common::NodeId id) {
    absl::MutexLock lock(&mu_);
    id_ = id;
  }

 private:
  absl::Mutex mu_;
  common::NodeId id_ ABSL_GUARDED_BY(mu_);
  common::NodeId last_peer_ ABSL_GUARDED_BY(mu_);
};

template <typename T>
absl::StatusOr<T> Wait(std::function<void(absl::AnyInvocable<void(absl::StatusOr<T>)>)> start) {
  absl::Notification done;
  absl::StatusOr<T> result = absl::UnknownError("no reply");
  start([&](absl::StatusOr<T> r) {
    result = std::move(r);
    done.Notify();
  });
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(20)));
  return result;
}

class GrpcGossipTest : public ::testing::Test {
 protected:
  GrpcGossipTest()
      : clock_(common::RealClock::Create()),
        server_id_(*identity::Identity::Generate()),
        client_id_(*identity::Identity::Generate()),
        handler_(server_id_->id()) {}

  void StartServer(bool insecure) {
    auto server = GrpcGossipServer::Start("127.0.0.1:0", &handler_,
                                          {server_id_.get(), insecure},
                                          clock_->Now());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    address_ = absl::StrCat("127.0.0.1:", server_->port());
  }

  absl::StatusOr<proto::Ack> Ping(GrpcGossipTransport& t, common::NodeId expect) {
    proto::PingRequest req;
    req.set_seq(9);
    return Wait<proto::Ack>([&](AckCallback cb) {
      t.Ping({address_, expect}, req, absl::Seconds(5), std::move(cb));
    });
  }

  std::unique_ptr<common::RealClock> clock_;
  std::unique_ptr<identity::Identity> server_id_, client_id_;
  FakeHandler handler_;
  std::unique_ptr<GrpcGossipServer> server_;
  std::string address_;
};

TEST_F(GrpcGossipTest, MutualTlsAuthenticatesBothSidesByKeyHash) {
  StartServer(/*insecure=*/false);
  GrpcGossipTransport client({client_id_.get(), false}, clock_.get());
  auto ack = Ping(client, server_id_->id());
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->seq(), 9u);
  EXPECT_EQ(handler_.last_peer(), client_id_->id());
}

TEST_F(GrpcGossipTest, ServerThatIsNotTheExpectedNodeIsRejected) {
  StartServer(false);
  GrpcGossipTransport client({client_id_.get(), false}, clock_.get());
  auto ack = Ping(client, common::NodeId::ForName("someone-else"));
  EXPECT_EQ(ack.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(ClassifyGossipError(ack.status()), JoinStep::kIdentity);
  // A reply that claims an id other than its certificate's is rejected too.
  handler_.set_id(common::NodeId::ForName("impostor"));
  EXPECT_EQ(Ping(client, common::NodeId()).status().code(),
            absl::StatusCode::kUnauthenticated);
}

TEST_F(GrpcGossipTest, InsecureModeWorksAndCannotTalkToTls) {
  StartServer(/*insecure=*/true);
  GrpcGossipTransport plain({nullptr, true}, clock_.get());
  auto ack = Ping(plain, server_id_->id());
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_TRUE(handler_.last_peer().IsZero());
  // A TLS client against a plain-text server fails at the TLS step.
  GrpcGossipTransport tls({client_id_.get(), false}, clock_.get());
  auto bad = Ping(tls, server_id_->id());
  EXPECT_FALSE(bad.ok());
  std::cout << "TLS-vs-plain diagnosis: " << bad.status() << std::endl;
}

TEST_F(GrpcGossipTest, PlainTextClientAgainstTlsIsDiagnosedAsTls) {
  StartServer(/*insecure=*/false);
  GrpcGossipTransport plain({nullptr, true}, clock_.get());
  auto ack = Ping(plain, server_id_->id());
  ASSERT_FALSE(ack.ok());
  std::cout << "plain-vs-TLS diagnosis: " << ack.status() << std::endl;
  EXPECT_EQ(ClassifyGossipError(ack.status()), JoinStep::kTls);
  EXPECT_NE(ack.status().message().find("--insecure"), std::string::npos);
}

TEST_F(GrpcGossipTest, ClosedPortIsDiagnosedAsTcp) {
  StartServer(false);
  server_->Shutdown();
  GrpcGossipTransport client({client_id_.get(), false}, clock_.get());
  auto ack = Ping(client, server_id_->id());
  ASSERT_FALSE(ack.ok());
  std::cout << "closed port diagnosis: " << ack.status() << std::endl;
  EXPECT_EQ(ClassifyGossipError(ack.status()), JoinStep::kTcp);
  EXPECT_NE(ack.status().message().find("hint:"), std::string::npos);
}

TEST_F(GrpcGossipTest, ClientWithoutCertificateIsRejected) {
  StartServer(false);
  // TLS, but no identity certificate offered.
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_verify_server_certs(false);
  options.set_check_call_host(false);
  options.set_certificate_verifier(
      std::make_shared<grpc::experimental::NoOpCertificateVerifier>());
  auto stub = proto::GossipService::NewStub(grpc::CreateChannel(
      address_, grpc::experimental::TlsCredentials(options)));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(clock_->Now() + absl::Seconds(5)));
  proto::PingRequest req;
  proto::Ack ack;
  grpc::Status s = stub->Ping(&ctx, req, &ack);
  EXPECT_FALSE(s.ok());
  std::cout << "no-certificate client: " << s.error_message() << std::endl;
  EXPECT_TRUE(handler_.last_peer().IsZero());  // never reached the handler
}

TEST(BootstrapDiagnosticsTest, ClassifiesEachStep) {
  EXPECT_EQ(ClassifyGossipError(absl::UnavailableError("DNS resolution failed for x")),
            JoinStep::kDns);
  EXPECT_EQ(ClassifyGossipError(absl::UnavailableError(
                "failed to connect to all addresses; Connection refused")),
            JoinStep::kTcp);
  EXPECT_EQ(ClassifyGossipError(absl::UnavailableError("Ssl handshake failed")),
            JoinStep::kTls);
  EXPECT_EQ(ClassifyGossipError(proto::CheckProtocolVersion(99)), JoinStep::kVersion);
  EXPECT_EQ(ClassifyGossipError(absl::FailedPreconditionError("swarm id mismatch")),
            JoinStep::kSwarm);
  EXPECT_EQ(ClassifyGossipError(absl::PermissionDeniedError("not on allow-list")),
            JoinStep::kAdmission);
  EXPECT_EQ(ClassifyGossipError(absl::DeadlineExceededError("")), JoinStep::kTimeout);
  absl::Status s = ExplainGossipError(absl::UnavailableError("Connection refused"), "h:1");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("h:1: [tcp]"), std::string::npos);
}

// Three Memberships over mutual TLS on loopback, on the real clock.
TEST(GrpcMembershipTest, NodesJoinOverMutualTlsAndOtherSwarmIsRefused) {
  auto clock = common::RealClock::Create();
  struct Node {
    std::unique_ptr<identity::Identity> identity;
    std::unique_ptr<GrpcGossipTransport> transport;
    std::unique_ptr<Membership> membership;
    std::unique_ptr<GrpcGossipServer> server;
  };
  std::vector<Node> nodes(4);
  absl::Mutex mu;
  int joined = 0;
  for (int i = 0; i < 4; ++i) {
    Node& n = nodes[i];
    n.identity = *identity::Identity::Generate();
    n.transport = std::make_unique<GrpcGossipTransport>(
        identity::GrpcSecurity{n.identity.get(), false}, clock.get());
    MembershipOptions o;
    o.policy.swarm_id = i < 3 ? "grpc-swarm" : "another-swarm";
    o.probe_interval = absl::Milliseconds(100);
    o.probe_timeout = absl::Milliseconds(50);
    o.gossip_interval = absl::Milliseconds(50);
    o.join_rounds = 1;
    // Reserve a port first: the record must carry the real address.
    auto listener = GrpcGossipServer::Start("127.0.0.1:0", nullptr,
                                            {n.identity.get(), false}, clock->Now());
    ASSERT_TRUE(listener.ok());
    const int port = (*listener)->port();
    (*listener)->Shutdown();
    o.addresses = {absl::StrCat("127.0.0.1:", port)};
    n.membership = *Membership::Create(o, n.identity.get(), n.transport.get(),
                                       clock.get(), common::Random(i));
    n.membership->AddListener([&, i](const MemberChange& c) {
      if (i == 2 && c.old_state == proto::MEMBER_STATE_UNSPECIFIED) {
        absl::MutexLock lock(&mu);
        ++joined;
      }
    });
    auto server = GrpcGossipServer::Start(o.addresses[0], n.membership.get(),
                                          {n.identity.get(), false}, clock->Now());
    ASSERT_TRUE(server.ok()) << server.status();
    n.server = *std::move(server);
    n.membership->Start();
  }
  const std::string seed = nodes[0].membership->GetView().members[0].addresses[0];
  for (int i = 1; i < 3; ++i) {
    auto s = Wait<bool>([&](absl::AnyInvocable<void(absl::StatusOr<bool>)> cb) {
      nodes[i].membership->Join({seed}, [cb = std::move(cb)](absl::Status s) mutable {
        cb(s.ok() ? absl::StatusOr<bool>(true) : absl::StatusOr<bool>(s));
      });
    });
    ASSERT_TRUE(s.ok()) << s.status();
  }
  {
    absl::MutexLock lock(&mu);
    EXPECT_TRUE(mu.AwaitWithTimeout(
        absl::Condition(+[](int* j) { return *j >= 2; }, &joined), absl::Seconds(20)));
  }
  EXPECT_EQ(nodes[2].membership->GetView().Live().size(), 3u);
  auto other = Wait<bool>([&](absl::AnyInvocable<void(absl::StatusOr<bool>)> cb) {
    nodes[3].membership->Join({seed}, [cb = std::move(cb)](absl::Status s) mutable {
      cb(s.ok() ? absl::StatusOr<bool>(true) : absl::StatusOr<bool>(s));
    });
  });
  ASSERT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition);
  std::cout << "other-swarm join: " << other.status() << std::endl;
  EXPECT_NE(other.status().message().find("[swarm]"), std::string::npos);
  EXPECT_EQ(nodes[0].membership->GetView().Find(nodes[3].identity->id()), nullptr);
  for (Node& n : nodes) n.server->Shutdown();
  for (Node& n : nodes) n.membership->Stop();
  for (Node& n : nodes) n.membership.reset();
}

}  // namespace
}  // namespace skipswarm::membership
