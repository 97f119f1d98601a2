// A hostile state source, built from proto/stage.proto alone, answers a
// replica's FetchState (Note [Digest re-sync]) with a state that claims
// 1 TiB and streams 1 MiB chunks for as long as it is read. The fetching
// replica is the real GrpcGroupComm on loopback (port 0); it must stop at
// its stage's known size (Note [Push admission] in node/train/grpc_group_push.cc).
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/crc32c.h"
#include "common/node_id.h"
#include "common/real_clock.h"
#include "gtest/gtest.h"
#include "node/stage/swarm_view.h"
#include "node/train/grpc_group.h"
#include "proto/stage.grpc.pb.h"

namespace skipswarm::node {
namespace {

using common::NodeId;

class EndlessStateSource final : public proto::StageService::Service {
 public:
  grpc::Status FetchState(grpc::ServerContext* context, const proto::StateRequest* request,
                          grpc::ServerWriter<proto::StateChunk>* writer) override {
    const std::string data(size_t{1} << 20, 'x');
    const uint32_t crc = common::Crc32c(data);
    for (uint64_t offset = 0; offset < (uint64_t{1} << 40); offset += data.size()) {
      if (context->IsCancelled()) break;
      proto::StateChunk chunk;
      chunk.set_stage(request->stage());
      chunk.set_iteration(request->iteration());
      chunk.set_total_bytes(uint64_t{1} << 40);
      chunk.set_offset(offset);
      chunk.set_data(data);
      chunk.set_crc32c(crc);
      if (!writer->Write(chunk)) break;
      sent_ += data.size();
    }
    return grpc::Status::OK;
  }
  std::atomic<uint64_t> sent_{0};
};

TEST(StateTransferFloodTest, ClaimedStateBeyondTheStageSizeIsRefused) {
  auto clock = common::RealClock::Create();
  const NodeId honest = NodeId::ForName("honest"), mallory = NodeId::ForName("mallory");
  EndlessStateSource source;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&source);
  auto server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);

  StaticSwarmView view({{honest, {1}, 4, "", ""}, {mallory, {1}, 4, "", ""}});
  view.SetAddresses(mallory, "", "127.0.0.1:" + std::to_string(port));
  GrpcGroupOptions o;
  o.self = honest;
  o.push_deadline = absl::Seconds(3);
  o.credentials = identity::PeerCredentials::Insecure();
  auto group = GrpcGroupComm::Create(o, &view, clock.get());
  ASSERT_TRUE(group.ok()) << group.status();
  view.SetAddresses(honest, "", "127.0.0.1:" + std::to_string((*group)->port()));

  // One round alone tells the replica its stage's size: 1,000 elements.
  absl::Notification reduced;
  view.MarkDead(mallory);
  (*group)->AllReduce(0, 1, {honest, std::vector<float>(1000, 1.f), 1, 7, nullptr},
                      [&](absl::StatusOr<ReduceResult>) { reduced.Notify(); });
  ASSERT_TRUE(reduced.WaitForNotificationWithTimeout(absl::Seconds(20)));

  std::optional<absl::StatusOr<std::string>> got;
  absl::Notification fetched;
  (*group)->FetchState(1, 1, mallory, [&](absl::StatusOr<std::string> state) {
    got = std::move(state);
    fetched.Notify();
  });
  ASSERT_TRUE(fetched.WaitForNotificationWithTimeout(absl::Seconds(30)));
  ASSERT_FALSE(got->ok());
  EXPECT_TRUE(absl::IsResourceExhausted(got->status())) << got->status();
  // Refused at the first chunk: nowhere near the claimed terabyte was read.
  EXPECT_LT(source.sent_.load(), uint64_t{64} << 20);
  group->reset();
  server->Shutdown();
}

}  // namespace
}  // namespace skipswarm::node
