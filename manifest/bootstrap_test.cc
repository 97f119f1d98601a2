// Each bootstrap mistake, made against a real server on a port the kernel
// picks (port 0), gets its own step and hint.
#include "manifest/bootstrap.h"

#include <grpcpp/grpcpp.h>
#include "third_party/cpp_httplib.h"
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/free_port.h"
#include "common/peer_quota.h"
#include "common/sim_clock.h"
#include "gtest/gtest.h"
#include "identity/test_identity.h"
#include "manifest/join_challenge.h"
#include "manifest/manifest_service.h"
#include "proto/version.h"

namespace skipswarm::manifest {
namespace {

constexpr char kSwarmId[] = "swarm-a";

proto::SignedManifest Signed(const identity::Identity& founder) {
  proto::SwarmManifest m;
  m.set_format(kManifestFormat);
  m.set_protocol_version(proto::kProtocolVersion);
  m.mutable_model()->set_num_layers(4);
  return *SignManifest(m, founder);
}

// A gRPC server on 127.0.0.1:0 serving `service` (or nothing).
struct Server {
  explicit Server(grpc::Service* service,
                  std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials()) {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", creds, &port);
    if (service) b.RegisterService(service);
    server = b.BuildAndStart();
  }
  ~Server() { server->Shutdown(); }
  std::string address() const { return absl::StrCat("127.0.0.1:", port); }
  int port = 0;
  std::unique_ptr<grpc::Server> server;
};

class BootstrapTest : public ::testing::Test {
 protected:
  BootstrapTest()
      : founder_(identity::TestIdentity('\x01')),
        signed_(Signed(*founder_)),
        service_(signed_, kSwarmId),
        clock_(common::RealClock::Create()) {}

  absl::StatusOr<VerifiedManifest> Fetch(std::vector<std::string> addresses,
                                         std::string pinned = "",
                                         std::string swarm_id = kSwarmId,
                                         std::shared_ptr<const identity::PeerCredentials> creds =
                                             identity::PeerCredentials::Insecure(),
                                         absl::Duration timeout = absl::Milliseconds(300)) {
    JoinTargets t;
    t.addresses = std::move(addresses);
    t.pinned_sha256 = std::move(pinned);
    BootstrapOptions o;
    o.credentials = std::move(creds);
    o.swarm_id = std::move(swarm_id);
    o.timeout = timeout;
    o.call_timeout = timeout;
    return FetchSwarmManifest(t, o, clock_.get());
  }

  std::unique_ptr<identity::Identity> founder_;
  proto::SignedManifest signed_;
  ManifestService service_;
  std::unique_ptr<common::RealClock> clock_;
};

TEST_F(BootstrapTest, TheManifestIsFetchedAndVerified) {
  Server s(&service_);
  auto v = Fetch({s.address()}, "", kSwarmId, identity::PeerCredentials::Insecure(),
                 absl::Seconds(20));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->manifest.model().num_layers(), 4);
  EXPECT_EQ(v->founder, founder_->id());
}

TEST_F(BootstrapTest, TheFirstWorkingAddressOfSeveralServes) {
  Server s(&service_);
  auto v = Fetch({"no-such-host.invalid:7000", s.address()}, "", kSwarmId,
                 identity::PeerCredentials::Insecure(), absl::Seconds(20));
  ASSERT_TRUE(v.ok()) << v.status();
}

TEST_F(BootstrapTest, AnotherSwarmIdIsAdmissionRefused) {
  Server s(&service_);
  auto v = Fetch({s.address()}, "", "swarm-b");
  EXPECT_EQ(v.status().code(), absl::StatusCode::kPermissionDenied) << v.status();
  EXPECT_TRUE(absl::StrContains(v.status().message(), "[admission]")) << v.status();
  EXPECT_TRUE(absl::StrContains(v.status().message(), "--swarm_secret")) << v.status();
}

TEST_F(BootstrapTest, APinnedHashOfAnotherSwarmIsAManifestError) {
  Server s(&service_);
  auto v = Fetch({s.address()}, std::string(64, 'e'));
  EXPECT_TRUE(absl::StrContains(v.status().message(), "[manifest]")) << v.status();
  EXPECT_TRUE(absl::StrContains(v.status().message(), "swarm file pins")) << v.status();
}

TEST_F(BootstrapTest, AWronglySignedManifestIsAManifestError) {
  proto::SignedManifest forged = signed_;
  forged.set_signature(std::string(64, '\0'));
  ManifestService liar(forged, kSwarmId);
  Server s(&liar);
  auto v = Fetch({s.address()});
  EXPECT_TRUE(absl::StrContains(v.status().message(), "[manifest]")) << v.status();
  EXPECT_TRUE(absl::StrContains(v.status().message(), "signature")) << v.status();
}

TEST_F(BootstrapTest, AnOversizedAnswerIsRefusedByTheChannel) {
  proto::SignedManifest huge = signed_;
  huge.set_manifest(std::string(1 << 20, 'x'));
  ManifestService liar(huge, kSwarmId);
  Server s(&liar);
  auto v = Fetch({s.address()});
  EXPECT_TRUE(absl::StrContains(v.status().message(), "[manifest]")) << v.status();
}

TEST_F(BootstrapTest, APeerWithoutTheServiceIsNamed) {
  // The generated base class answers UNIMPLEMENTED, as a node of an older
  // build (no manifest service on its port) does.
  proto::SwarmManifestService::Service unimplemented;
  Server s(&unimplemented);
  auto v = Fetch({s.address()});
  EXPECT_TRUE(absl::StrContains(v.status().message(), "[manifest]")) << v.status();
}

TEST_F(BootstrapTest, TheMetricsPortIsRecognisedByItsHttpAnswer) {
  httplib::Server http;
  http.Get("/metrics", [](const httplib::Request&, httplib::Response& r) {
    r.set_content("skipswarm_up 1\n", "text/plain");
  });
  const int port = http.bind_to_any_port("127.0.0.1");
  std::thread t([&] { http.listen_after_bind(); });
  const std::string address = absl::StrCat("127.0.0.1:", port);
  EXPECT_TRUE(AnswersHttp(address, absl::Seconds(2)));
  auto v = Fetch({address});
  http.stop();
  t.join();
  EXPECT_TRUE(absl::StrContains(v.status().message(), "[http]")) << v.status();
  EXPECT_TRUE(absl::StrContains(v.status().message(), "metrics or status port")) << v.status();
}

TEST_F(BootstrapTest, TheMetricsPortIsRecognisedOverTlsToo) {
  // A TLS joiner's handshake meets an HTTP server: gRPC reports a TLS
  // failure; the probe tells what is really there.
  httplib::Server http;
  http.Get("/", [](const httplib::Request&, httplib::Response& r) { r.set_content("ok", "text/plain"); });
  const int port = http.bind_to_any_port("127.0.0.1");
  std::thread t([&] { http.listen_after_bind(); });
  auto joiner = identity::TestIdentity('\x03');
  auto v = Fetch({absl::StrCat("127.0.0.1:", port)}, "", kSwarmId,
                 *identity::PeerCredentials::Create({joiner.get(), false}, clock_->Now()));
  http.stop();
  t.join();
  EXPECT_TRUE(absl::StrContains(v.status().message(), "[http]")) << v.status();
}

TEST_F(BootstrapTest, AClosedPortIsATcpErrorAfterRetries) {
  // A port the kernel gave us and that we closed: nothing listens there.
  absl::StatusOr<int> port = common::FreeLoopbackPort();
  ASSERT_TRUE(port.ok()) << port.status();
  const std::string address = absl::StrCat("127.0.0.1:", *port);
  EXPECT_FALSE(AnswersHttp(address, absl::Milliseconds(200)));
  auto v = Fetch({address});
  EXPECT_TRUE(absl::StrContains(v.status().message(), "[tcp]")) << v.status();
  EXPECT_TRUE(absl::StrContains(v.status().message(), "is the peer running")) << v.status();
}

TEST_F(BootstrapTest, AnUnresolvableHostIsADnsError) {
  auto v = Fetch({"no-such-host.invalid:7000"});
  EXPECT_TRUE(absl::StrContains(v.status().message(), "[dns]")) << v.status();
  EXPECT_TRUE(absl::StrContains(v.status().message(), "does not resolve")) << v.status();
}

TEST_F(BootstrapTest, PlainTextAgainstATlsNodeIsATlsError) {
  auto creds = *identity::PeerCredentials::Create({founder_.get(), false}, clock_->Now());
  Server s(&service_, creds->ForServer());
  auto v = Fetch({s.address()});
  EXPECT_TRUE(absl::StrContains(v.status().message(), "[tls]")) << v.status();
}

TEST_F(BootstrapTest, TlsBetweenTwoIdentitiesWorks) {
  auto server_creds = *identity::PeerCredentials::Create({founder_.get(), false}, clock_->Now());
  Server s(&service_, server_creds->ForServer());
  auto joiner = identity::TestIdentity('\x02');
  // A generous deadline: two TLS handshakes on a loaded machine.
  auto v = Fetch({s.address()}, "", kSwarmId,
                 *identity::PeerCredentials::Create({joiner.get(), false}, clock_->Now()),
                 absl::Seconds(20));
  ASSERT_TRUE(v.ok()) << v.status();
}

// Hostile input: a busy seed's challenge is answered only when it parses,
// and a seed giving a new one at every call gets no tight loop.
class ChallengingSeed final : public proto::SwarmManifestService::Service {
 public:
  explicit ChallengingSeed(bool well_formed) : well_formed_(well_formed) {}
  grpc::Status GetManifest(grpc::ServerContext* context, const proto::GetManifestRequest* request,
                           proto::GetManifestResponse*) override {
    const int n = ++calls;
    if (!request->signature().empty()) ++signed_calls;
    context->AddTrailingMetadata(
        kJoinChallengeKey, well_formed_ ? absl::StrCat(n, "/", std::string(64, 'a'))
                                        : absl::StrCat(n, "/", std::string(64, 'A')));
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        "manifest: stranger is over its quota (strangers)");
  }
  std::atomic<int> calls{0};
  std::atomic<int> signed_calls{0};

 private:
  const bool well_formed_;
};

TEST_F(BootstrapTest, AChallengeIsAnsweredOnlyWellFormedAndNeverInATightLoop) {
  auto joiner = identity::TestIdentity('\x02');
  for (bool well_formed : {false, true}) {
    ChallengingSeed seed(well_formed);
    Server s(&seed);
    JoinTargets t;
    t.addresses = {s.address()};
    BootstrapOptions o;
    o.credentials = identity::PeerCredentials::Insecure();
    o.swarm_id = kSwarmId;
    o.timeout = absl::Seconds(1);
    o.signer = joiner.get();
    auto v = FetchSwarmManifest(t, o, clock_.get());
    std::cout << "seed challenging (well formed=" << well_formed << "): " << seed.calls
              << " calls in 1 s, " << seed.signed_calls << " signed\n";
    EXPECT_TRUE(absl::StrContains(v.status().message(), "[busy]")) << v.status();
    if (well_formed) {
      EXPECT_GE(seed.signed_calls.load(), 1);
      EXPECT_LE(seed.calls.load(), 14);  // one immediate retry per backoff at most
    } else {
      EXPECT_EQ(seed.signed_calls.load(), 0);
      EXPECT_LE(seed.calls.load(), 8);
    }
  }
}

// Note [Peer quotas]: a caller's address gets a stranger's budget; a flood
// of GetManifest calls from it is refused once the burst is spent.
TEST(ManifestServiceTest, ACallersFloodIsHeldToItsAddressesQuota) {
  auto founder = identity::TestIdentity('\x01');
  common::SimClock quota_clock;
  common::PeerQuotaOptions q;
  q.service = "manifest";
  q.stranger = {/*messages_per_second=*/5, /*message_burst=*/20, 0, 0, 0};
  auto quota = std::make_shared<common::PeerQuota>(q, &quota_clock);
  ManifestService service(Signed(*founder), kSwarmId, quota);
  Server s(&service);
  auto clock = common::RealClock::Create();
  int ok = 0, exhausted = 0;
  for (int i = 0; i < 100; ++i) {
    absl::StatusOr<proto::SignedManifest> got = CallGetManifest(
        s.address(), identity::PeerCredentials::Insecure(), kSwarmId, absl::Seconds(20));
    ok += got.ok();
    exhausted += got.status().code() == absl::StatusCode::kResourceExhausted;
  }
  EXPECT_EQ(ok, 20);
  EXPECT_EQ(exhausted, 80);
  EXPECT_EQ(quota->tracked_peers(), 1u);  // one address: 127.0.0.1
  quota_clock.Advance(absl::Seconds(1));
  EXPECT_TRUE(CallGetManifest(s.address(), identity::PeerCredentials::Insecure(), kSwarmId,
                              absl::Seconds(20))
                  .ok());
}

}  // namespace
}  // namespace skipswarm::manifest
