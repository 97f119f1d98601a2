// Each bootstrap mistake a user can make with `skipswarm node --join=...`
// gets its own step and fix in the message, from the real binary. The
// servers it meets are this test's own (a gRPC node server serving a swarm
// manifest, an HTTP server standing in for a metrics port), all on ports
// the kernel picks.
#include <grpcpp/grpcpp.h>
#include "third_party/cpp_httplib.h"
#include <unistd.h>

#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/free_port.h"
#include "common/real_clock.h"
#include "gtest/gtest.h"
#include "identity/test_identity.h"
#include "manifest/manifest_service.h"
#include "manifest/signed_manifest.h"
#include "manifest/swarm_settings.h"
#include "membership/record.h"
#include "tests/harness/skipswarm_process.h"

namespace skipswarm::tests {
namespace {

// The swarm's manifest: a 4-layer, 2-stage model.
proto::SignedManifest SwarmManifest(const identity::Identity& founder) {
  manifest::SwarmSettings s;
  s.model.model.num_layers = 4;
  s.model.model.num_stages = 2;
  s.model.model.d_model = 64;
  s.model.model.num_heads = 4;
  s.model.model.ffn_dim = 128;
  s.model.model.seq_len = 32;
  s.tls = false;
  proto::ManifestTokenizer t;
  t.set_kind("bytes");
  return *manifest::SignManifest(manifest::BuildManifest(s, {}, t), founder);
}

class JoinDiagnosticsTest : public ::testing::Test {
 protected:
  JoinDiagnosticsTest()
      : clock_(common::RealClock::Create()),
        founder_(identity::TestIdentity('\x05')),
        service_(SwarmManifest(*founder_), membership::DeriveSwarmId("skipswarm", "")) {}
  ~JoinDiagnosticsTest() override {
    if (server_) server_->Shutdown();
  }

  // A node server serving `service` (plain text unless `tls`).
  std::string Serve(grpc::Service* service, bool tls = false) {
    grpc::ServerBuilder b;
    int port = 0;
    std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
    if (tls) {
      creds_ = *identity::PeerCredentials::Create({founder_.get(), false}, clock_->Now());
      creds = creds_->ForServer();
    }
    b.AddListeningPort("127.0.0.1:0", creds, &port);
    b.RegisterService(service);
    server_ = b.BuildAndStart();
    return absl::StrCat("127.0.0.1:", port);
  }

  // `skipswarm node --name=j --insecure --join=JOIN` plus `extra`.
  ProcessResult Join(const std::string& test, const std::string& join,
                     std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"node", "--name=j", "--insecure", "--threads=1",
                                     "--startup_timeout_s=1", "--join=" + join};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = RunSkipswarm(args, *MakeTestDir(test));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : ProcessResult{};
  }

  std::unique_ptr<common::RealClock> clock_;
  std::unique_ptr<identity::Identity> founder_;
  manifest::ManifestService service_;
  std::shared_ptr<const identity::PeerCredentials> creds_;
  std::unique_ptr<grpc::Server> server_;
};

// Nothing was built: the daemon's first line never came.
void ExpectNothingStarted(const ProcessResult& r) {
  EXPECT_FALSE(absl::StrContains(r.err, "gossip on")) << r.err;
  EXPECT_FALSE(absl::StrContains(r.err, "joiner, device")) << r.err;
}

TEST_F(JoinDiagnosticsTest, AMismatchedLayersFlagIsRefusedBeforeAnyStateMoves) {
  const std::string address = Serve(&service_);
  const ProcessResult r = Join("layers", address, {"--layers=6"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.err, "--layers=6 but the swarm manifest says 4")) << r.err;
  ExpectNothingStarted(r);
}

TEST_F(JoinDiagnosticsTest, AMissingPortIsNamed) {
  const ProcessResult r = Join("no_port", "127.0.0.1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.err, "[address] no port; hint: add the node's gossip port"))
      << r.err;
}

TEST_F(JoinDiagnosticsTest, AUrlIsNamed) {
  const ProcessResult r = Join("url", "http://127.0.0.1:9464/metrics");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.err, "[address] a URL, not a node address")) << r.err;
}

TEST_F(JoinDiagnosticsTest, TheMetricsPortIsRecognised) {
  httplib::Server http;
  http.Get("/metrics", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("skipswarm_up 1\n", "text/plain");
  });
  const int port = http.bind_to_any_port("127.0.0.1");
  std::thread t([&] { http.listen_after_bind(); });
  const ProcessResult r = Join("metrics_port", absl::StrCat("127.0.0.1:", port));
  http.stop();
  t.join();
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.err, "[http]")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "metrics or status port")) << r.err;
  // The hint names the line a node really prints (it said 'gossip on
  // HOST:PORT', which no node prints).
  EXPECT_TRUE(absl::StrContains(r.err, "'advertised as HOST:PORT'")) << r.err;
}

TEST_F(JoinDiagnosticsTest, AnUnresolvableHostIsADnsError) {
  const ProcessResult r = Join("dns", "no-such-host.invalid:7000");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.err, "[dns] cannot resolve 'no-such-host.invalid'")) << r.err;
}

TEST_F(JoinDiagnosticsTest, ARefusedConnectionIsATcpError) {
  absl::StatusOr<int> port = common::FreeLoopbackPort();  // nothing listens there
  ASSERT_TRUE(port.ok()) << port.status();
  const ProcessResult r = Join("tcp", absl::StrCat("127.0.0.1:", *port));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.err, "[tcp]")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "is the peer running")) << r.err;
}

TEST_F(JoinDiagnosticsTest, PlainTextAgainstATlsNodeIsATlsError) {
  const std::string address = Serve(&service_, /*tls=*/true);
  const ProcessResult r = Join("tls", address);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.err, "[tls]")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "--insecure")) << r.err;
}

TEST_F(JoinDiagnosticsTest, AnotherSwarmSecretIsAdmissionRefused) {
  const std::string address = Serve(&service_);
  const ProcessResult r = Join("admission", address, {"--swarm_secret=guess"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.err, "[admission] admission refused")) << r.err;
  ExpectNothingStarted(r);
}

TEST_F(JoinDiagnosticsTest, AWronglySignedManifestIsRefused) {
  proto::SignedManifest forged = SwarmManifest(*founder_);
  forged.set_signature(std::string(64, '\x01'));
  manifest::ManifestService liar(forged, membership::DeriveSwarmId("skipswarm", ""));
  const std::string address = Serve(&liar);
  const ProcessResult r = Join("forged", address);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.err, "[manifest] the swarm manifest's signature does not verify"))
      << r.err;
  ExpectNothingStarted(r);
}

TEST_F(JoinDiagnosticsTest, ASwarmFilePinningAnotherManifestIsRefused) {
  const std::string address = Serve(&service_);
  const std::string dir = *MakeTestDir("pinned_files");
  ASSERT_TRUE(WriteFile(dir + "/swarm.json",
                        absl::StrCat("{\"manifest_sha256\": \"", std::string(64, 'f'),
                                     "\", \"bootstrap\": [\"", address, "\"]}"))
                  .ok());
  const ProcessResult r = Join("pinned", dir + "/swarm.json");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.err, "[manifest]")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "swarm file pins")) << r.err;
}

TEST_F(JoinDiagnosticsTest, AMalformedSwarmFileIsRefused) {
  const std::string dir = *MakeTestDir("bad_files");
  ASSERT_TRUE(WriteFile(dir + "/swarm.json", "{\"bootstrap\": [").ok());
  const ProcessResult r = Join("bad_file", dir + "/swarm.json");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.signal, 0);
  EXPECT_TRUE(absl::StrContains(r.err, "[swarm-file] the swarm file is not a JSON object")) << r.err;
}

}  // namespace
}  // namespace skipswarm::tests
