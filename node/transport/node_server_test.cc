#include "node/transport/node_server.h"

#include <atomic>
#include <memory>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "common/real_clock.h"
#include "gtest/gtest.h"
#include "node/transport/grpc_transport.h"
#include "node/transport/test_util.h"
#include "proto/health.grpc.pb.h"

namespace skipswarm::node {
namespace {

using ::skipswarm::node::testutil::AckWaiter;
using ::skipswarm::node::testutil::kTestSwarm;
using ::skipswarm::node::testutil::MakeTestFrame;

GrpcTransportOptions Options(const PeerId& id, grpc::ServerBuilder* serve_on) {
  GrpcTransportOptions o;
  o.self = id;
  o.swarm_id = kTestSwarm;
  o.credentials = identity::PeerCredentials::Insecure();
  o.serve_on = serve_on;
  if (serve_on == nullptr) o.listen_address.clear();  // send only
  return o;
}

grpc::health::v1::HealthCheckResponse::ServingStatus Health(const std::string& address) {
  auto stub = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status status = stub->Check(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response.status();
}

// Pipeline frames and gRPC health answer on the same port; the transport
// registered on the server starts none of its own.
TEST(NodeServerTest, ServesARegisteredServiceAndHealthOnOnePort) {
  auto clock = common::RealClock::Create();
  const PeerId a = PeerId::ForName("a"), b = PeerId::ForName("b");
  NodeServer server(NodeServerOptions{"127.0.0.1:0"});
  auto receiver = GrpcTransport::Create(Options(b, server.builder()), clock.get()).value();
  EXPECT_EQ(receiver->port(), 0);
  ASSERT_TRUE(server.Start(identity::PeerCredentials::Insecure()).ok());
  ASSERT_NE(server.port(), 0);
  const std::string address = absl::StrCat("127.0.0.1:", server.port());

  std::atomic<bool> got{false};
  receiver->SetFrameHandler([&got](const PeerId&, Frame, AckFn ack) {
    got = true;
    ack(absl::OkStatus());
  });
  auto sender = GrpcTransport::Create(Options(a, nullptr), clock.get()).value();
  sender->SetPeerAddress(b, address);
  AckWaiter ack;
  sender->Send(b, MakeTestFrame({a, b, a}, 1, 1000, 0), ack.Callback());
  EXPECT_TRUE(ack.Wait().ok());
  EXPECT_TRUE(got);

  EXPECT_EQ(Health(address), grpc::health::v1::HealthCheckResponse::SERVING);
  server.SetServing(false);
  EXPECT_EQ(Health(address), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  sender.reset();
  server.Shutdown(absl::ZeroDuration());  // before the services go
  server.Shutdown(absl::ZeroDuration());  // idempotent
}

// Note [gRPC memory quota]: the server allocates from its quota and serves
// frames under it as before.
TEST(NodeServerTest, ServesUnderItsGrpcMemoryQuota) {
  auto clock = common::RealClock::Create();
  const PeerId a = PeerId::ForName("a"), b = PeerId::ForName("b");
  NodeServerOptions options{"127.0.0.1:0"};
  options.grpc_memory_quota_bytes = 64 << 20;
  options.grpc_max_threads = 64;
  NodeServer server(options);
  auto receiver = GrpcTransport::Create(Options(b, server.builder()), clock.get()).value();
  ASSERT_TRUE(server.Start(identity::PeerCredentials::Insecure()).ok());
  ASSERT_NE(server.resource_quota(), nullptr);
  std::atomic<int> got{0};
  receiver->SetFrameHandler([&got](const PeerId&, Frame, AckFn ack) {
    ++got;
    ack(absl::OkStatus());
  });
  auto sender = GrpcTransport::Create(Options(a, nullptr), clock.get()).value();
  sender->SetPeerAddress(b, absl::StrCat("127.0.0.1:", server.port()));
  for (int i = 0; i < 4; ++i) {
    AckWaiter ack;
    sender->Send(b, MakeTestFrame({a, b, a}, 1, 1 << 20, i), ack.Callback());
    EXPECT_TRUE(ack.Wait().ok());
  }
  EXPECT_EQ(got.load(), 4);
  sender.reset();
  server.Shutdown(absl::ZeroDuration());
}

TEST(NodeServerTest, ATakenPortIsRefusedNamingListen) {
  auto clock = common::RealClock::Create();
  NodeServer first(NodeServerOptions{"127.0.0.1:0"});
  // gRPC refuses to start a server without a service.
  auto transport =
      GrpcTransport::Create(Options(PeerId::ForName("a"), first.builder()), clock.get()).value();
  ASSERT_TRUE(first.Start(identity::PeerCredentials::Insecure()).ok());
  NodeServer second(NodeServerOptions{absl::StrCat("127.0.0.1:", first.port())});
  absl::Status s = second.Start(identity::PeerCredentials::Insecure());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("--listen"), absl::string_view::npos) << s;
  first.Shutdown(absl::ZeroDuration());
}

}  // namespace
}  // namespace skipswarm::node
