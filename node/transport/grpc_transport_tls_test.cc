// GrpcTransport over mutual TLS (Note [Peer authentication],
// identity/tls_credentials.h): frames flow between nodes with valid
// identities; a peer without a certificate, with a certificate for another
// id, or a server that is not the node the sender dialled, is refused and
// logged, and the server keeps serving.
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/synchronization/mutex.h"
#include "common/real_clock.h"
#include "gtest/gtest.h"
#include "identity/identity.h"
#include "identity/test_identity.h"
#include "identity/tls_credentials.h"
#include "node/transport/grpc_streams.h"
#include "node/transport/grpc_transport.h"
#include "node/transport/test_util.h"
#include "proto/pipeline.grpc.pb.h"

namespace skipswarm::node {
namespace {

using ::skipswarm::identity::Identity;
using ::skipswarm::identity::PeerCredentials;
using ::skipswarm::node::testutil::AckWaiter;
using ::skipswarm::node::testutil::kTestSwarm;
using ::skipswarm::node::testutil::LogCapture;
using ::skipswarm::node::testutil::MakeTestFrame;

// Frames admitted by a handler, and who sent them.
class Inbox {
 public:
  FrameHandler Handler() {
    return [this](const PeerId& from, Frame, AckFn ack) {
      {
        absl::MutexLock lock(&mu_);
        froms_.push_back(from);
      }
      ack(absl::OkStatus());
    };
  }
  std::vector<PeerId> froms() {
    absl::MutexLock lock(&mu_);
    return froms_;
  }

 private:
  absl::Mutex mu_;
  std::vector<PeerId> froms_ ABSL_GUARDED_BY(mu_);
};

class GrpcTransportTlsTest : public ::testing::Test {
 protected:
  GrpcTransportTlsTest()
      : clock_(common::RealClock::Create()),
        a_key_(identity::TestIdentity('a')),
        b_key_(identity::TestIdentity('b')),
        c_key_(identity::TestIdentity('c')) {
    a_ = Make(*a_key_);
    b_ = Make(*b_key_);
    a_->SetPeerAddress(b_id(), b_->loopback_address());
    b_->SetPeerAddress(a_id(), a_->loopback_address());
    a_->SetFrameHandler(a_inbox_.Handler());
    b_->SetFrameHandler(b_inbox_.Handler());
  }

  std::shared_ptr<const PeerCredentials> Creds(const Identity& key) {
    return PeerCredentials::Create({&key}, clock_->Now()).value();
  }

  std::unique_ptr<GrpcTransport> Make(const Identity& key) {
    GrpcTransportOptions options;
    options.self = key.id();
    options.swarm_id = kTestSwarm;
    options.credentials = Creds(key);
    return GrpcTransport::Create(options, clock_.get()).value();
  }

  PeerId a_id() const { return a_key_->id(); }
  PeerId b_id() const { return b_key_->id(); }

  // a → b works (the server still serves).
  void ExpectAToBWorks(uint64_t mb) {
    AckWaiter ack;
    a_->Send(b_id(), MakeTestFrame({a_id(), b_id(), a_id()}, 1, 1000, mb), ack.Callback());
    EXPECT_TRUE(ack.Wait().ok());
  }

  std::unique_ptr<common::RealClock> clock_;  // outlives the transports
  std::unique_ptr<Identity> a_key_, b_key_, c_key_;
  Inbox a_inbox_, b_inbox_;
  std::unique_ptr<GrpcTransport> a_, b_;
};

// One raw PipelineService stream with the given channel credentials,
// claiming `claimed` in its metadata; sends one valid frame to b.
grpc::Status RawStream(const std::string& address,
                       std::shared_ptr<grpc::ChannelCredentials> credentials,
                       const PeerId& claimed, const Frame& frame,
                       std::vector<int>* ack_codes) {
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride(identity::kCertificateDnsName);
  auto stub = proto::PipelineService::NewStub(
      grpc::CreateCustomChannel(address, credentials, args));
  grpc::ClientContext context;
  context.AddMetadata(internal::kNodeIdMetadata, claimed.Hex());
  auto stream = stub->Stream(&context);
  proto::PipelineMessage header;
  *header.mutable_header() = frame.header;
  if (stream->Write(header)) {
    proto::PipelineMessage chunk;
    chunk.mutable_chunk()->set_index(0);
    chunk.mutable_chunk()->set_data(std::string(frame.payload));
    stream->Write(chunk);
  }
  stream->WritesDone();
  proto::FrameAck ack;
  while (stream->Read(&ack)) ack_codes->push_back(ack.code());
  return stream->Finish();
}

TEST_F(GrpcTransportTlsTest, FramesFlowBothWaysWithValidIdentities) {
  AckWaiter to_b, to_a;
  a_->Send(b_id(), MakeTestFrame({a_id(), b_id(), a_id()}, 1, (2 << 20) + 7, 1),
           to_b.Callback());
  b_->Send(a_id(), MakeTestFrame({b_id(), a_id(), b_id()}, 1, 1000, 2), to_a.Callback());
  EXPECT_TRUE(to_b.Wait().ok()) << to_b.Wait();
  EXPECT_TRUE(to_a.Wait().ok()) << to_a.Wait();
  EXPECT_EQ(b_inbox_.froms(), std::vector<PeerId>{a_id()});
  EXPECT_EQ(a_inbox_.froms(), std::vector<PeerId>{b_id()});
}

TEST_F(GrpcTransportTlsTest, RefusesSelfThatIsNotTheIdentitysId) {
  GrpcTransportOptions options;
  options.self = PeerId::ForName("someone else");
  options.credentials = Creds(*a_key_);
  EXPECT_EQ(GrpcTransport::Create(options, clock_.get()).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.self = a_id();
  options.credentials = nullptr;  // plain text must be asked for
  EXPECT_EQ(GrpcTransport::Create(options, clock_.get()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(GrpcTransportTlsTest, PeerWithoutACertificateIsRefused) {
  const Frame frame = MakeTestFrame({a_id(), b_id(), a_id()}, 1, 100, 5);
  const std::string b_cert = b_key_->SelfSignedCertificatePem(clock_->Now()).value();
  // Standard TLS that trusts b's certificate but presents none.
  grpc::SslCredentialsOptions no_cert;
  no_cert.pem_root_certs = b_cert;
  std::vector<int> codes;
  grpc::Status s = RawStream(b_->loopback_address(), grpc::SslCredentials(no_cert), a_id(),
                             frame, &codes);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(codes.empty());
  // Plain text to a TLS server: no handshake at all.
  codes.clear();
  s = RawStream(b_->loopback_address(), grpc::InsecureChannelCredentials(), a_id(), frame,
                &codes);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(codes.empty());
  // Control: the same standard TLS with a's key pair is accepted as a.
  grpc::SslCredentialsOptions with_cert = no_cert;
  with_cert.pem_private_key = a_key_->PrivateKeyPem();
  with_cert.pem_cert_chain = a_key_->SelfSignedCertificatePem(clock_->Now()).value();
  codes.clear();
  s = RawStream(b_->loopback_address(), grpc::SslCredentials(with_cert), a_id(), frame,
                &codes);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(codes, std::vector<int>{0});
  EXPECT_EQ(b_inbox_.froms(), std::vector<PeerId>{a_id()});
  ExpectAToBWorks(6);
}

TEST_F(GrpcTransportTlsTest, CertificateForAnotherIdThanTheClaimedSenderIsRefusedAndLogged) {
  LogCapture log;
  // c's valid certificate, claiming to be a.
  std::vector<int> codes;
  grpc::Status s = RawStream(b_->loopback_address(), Creds(*c_key_)->ForChannel(b_id()), a_id(),
                             MakeTestFrame({a_id(), b_id(), a_id()}, 1, 100, 7), &codes);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
  EXPECT_TRUE(codes.empty());
  EXPECT_TRUE(b_inbox_.froms().empty());
  EXPECT_TRUE(log.WaitFor("refused pipeline stream"));
  EXPECT_GE(log.Count(c_key_->id().ShortString()), 1);
  // Control: c as itself (its own id in the metadata) is accepted.
  GrpcTransportOptions options;
  options.self = c_key_->id();
  options.swarm_id = kTestSwarm;
  options.credentials = Creds(*c_key_);
  auto c = GrpcTransport::Create(options, clock_.get()).value();
  c->SetPeerAddress(b_id(), b_->loopback_address());
  AckWaiter ack;
  c->Send(b_id(), MakeTestFrame({a_id(), b_id(), a_id()}, 1, 100, 8), ack.Callback());
  EXPECT_TRUE(ack.Wait().ok());
  ExpectAToBWorks(9);
  EXPECT_EQ(b_inbox_.froms(), (std::vector<PeerId>{c_key_->id(), a_id()}));
}

TEST_F(GrpcTransportTlsTest, SenderRefusesAServerThatIsNotThePeerItDialled) {
  LogCapture log;
  auto c = Make(*c_key_);
  Inbox c_inbox;
  c->SetFrameHandler(c_inbox.Handler());
  // a believes b lives at c's address.
  const PeerId b = b_id();
  a_->SetPeerAddress(b, c->loopback_address());
  AckWaiter ack;
  a_->Send(b, MakeTestFrame({a_id(), b, a_id()}, 1, 100, 10), ack.Callback());
  const absl::Status s = ack.Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_TRUE(c_inbox.froms().empty());
  EXPECT_TRUE(log.WaitFor("refused a server while dialling node " + b.ShortString()));
  // c keeps serving its real peers.
  c->SetPeerAddress(a_id(), a_->loopback_address());
  AckWaiter back;
  c->Send(a_id(), MakeTestFrame({c_key_->id(), a_id(), c_key_->id()}, 1, 100, 11),
          back.Callback());
  EXPECT_TRUE(back.Wait().ok());
}

}  // namespace
}  // namespace skipswarm::node
