// A stranger floods a replica's StageService.PushGradients with 128 MiB
// pushes (the measured attack held eight of them, +1.1 GB, for good). The
// client is built from proto/stage.proto alone; the replica is the real
// GrpcGroupComm on loopback (port 0). Note [Push admission] in
// node/train/grpc_group_push.cc.
#include <grpcpp/grpcpp.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/node_id.h"
#include "common/real_clock.h"
#include "gtest/gtest.h"
#include "node/stage/swarm_view.h"
#include "node/train/grpc_group.h"
#include "proto/stage.grpc.pb.h"
#include "proto/version.h"

namespace skipswarm::node {
namespace {

using common::NodeId;

constexpr int64_t kHugeElements = int64_t{32} << 20;  // 128 MiB of floats
constexpr size_t kChunkFloats = size_t{1} << 18;       // 1 MiB

// Resident set size of this process, bytes (0 if unknown).
uint64_t RssBytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * 4096;
}

// One hostile push: a 128 MiB reduce-scatter part for `iteration`, written
// chunk by chunk until the replica stops reading.
grpc::Status HostilePush(const std::string& address, const NodeId& self, uint64_t iteration) {
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  auto stub = proto::StageService::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(common::SystemDeadlineAfter(absl::Seconds(30)));
  auto stream = stub->PushGradients(&context);
  const std::string data(kChunkFloats * sizeof(float), '\0');
  const uint32_t count = static_cast<uint32_t>(kHugeElements / kChunkFloats);
  for (uint32_t i = 0; i < count; ++i) {
    proto::GradientChunk chunk;
    chunk.set_protocol_version(proto::kProtocolVersion);
    chunk.set_from(self.Bytes());
    chunk.set_stage(1);
    chunk.set_iteration(iteration);
    chunk.set_phase(1);
    chunk.set_shard(0);
    chunk.set_total_elements(kHugeElements);
    chunk.set_visits(1);
    if (i == 0) chunk.add_members(self.Bytes());
    chunk.set_chunk_index(i);
    chunk.set_chunk_count(count);
    chunk.set_offset(static_cast<uint64_t>(i) * kChunkFloats);
    chunk.mutable_tensor()->set_dtype(proto::DTYPE_FLOAT32);
    chunk.mutable_tensor()->set_codec(proto::CODEC_RAW_FP32);
    chunk.mutable_tensor()->add_shape(kHugeElements);
    chunk.set_data(data);
    if (!stream->Write(chunk)) break;
  }
  stream->WritesDone();
  return stream->Finish();
}

class GradientPushFloodTest : public ::testing::Test {
 protected:
  void SetUp() override {
    clock_ = common::RealClock::Create();
    for (int i = 0; i < 2; ++i) ids_.push_back(NodeId::ForName("r" + std::to_string(i)));
    std::vector<PeerInfo> members;
    for (int i = 0; i < 2; ++i) members.push_back({ids_[i], {1}, 4, "", ""});
    for (int i = 0; i < 2; ++i) views_.push_back(std::make_unique<StaticSwarmView>(members));
    for (int i = 0; i < 2; ++i) {
      GrpcGroupOptions o;
      o.self = ids_[i];
      o.push_deadline = absl::Seconds(10);
      o.credentials = identity::PeerCredentials::Insecure();
      auto g = GrpcGroupComm::Create(o, views_[i].get(), clock_.get());
      ASSERT_TRUE(g.ok()) << g.status();
      groups_.push_back(*std::move(g));
    }
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 2; ++j) {
        views_[i]->SetAddresses(ids_[j], "", "127.0.0.1:" + std::to_string(groups_[j]->port()));
      }
    }
  }

  // One honest round of both replicas; true if both got the same sum.
  bool HonestRound(uint64_t iteration) {
    const size_t n = 300000;
    std::optional<absl::StatusOr<ReduceResult>> r[2];
    absl::Notification done[2];
    for (int i = 0; i < 2; ++i) {
      groups_[i]->AllReduce(iteration, 1, {ids_[i], std::vector<float>(n, 1.0f + i), 1, 7, nullptr},
                            [&, i](absl::StatusOr<ReduceResult> got) {
                              r[i] = std::move(got);
                              done[i].Notify();
                            });
    }
    for (int i = 0; i < 2; ++i) {
      if (!done[i].WaitForNotificationWithTimeout(absl::Seconds(30))) return false;
      if (!r[i]->ok()) return false;
    }
    return (*r[0])->sum == (*r[1])->sum && (*r[0])->sum[0] == 3.0f;
  }

  std::string Address(int i) { return "127.0.0.1:" + std::to_string(groups_[i]->port()); }

  std::unique_ptr<common::RealClock> clock_;
  std::vector<NodeId> ids_;
  std::vector<std::unique_ptr<StaticSwarmView>> views_;
  std::vector<std::unique_ptr<GrpcGroupComm>> groups_;
};

TEST_F(GradientPushFloodTest, HugeAndFuturePushesAreRefusedAndMemoryStaysFlat) {
  const NodeId mallory = NodeId::ForName("mallory");
  const uint64_t rss_before = RssBytes();
  // Before any round the stage's size is unknown: the early budget refuses.
  for (int k = 0; k < 8; ++k) {
    grpc::Status s = HostilePush(Address(1), mallory, 1'000'000 + k);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  }
  ASSERT_TRUE(HonestRound(0));
  // Now the replica is at iteration 0 and knows stage 1's size.
  for (int k = 0; k < 8; ++k) {
    grpc::Status s = HostilePush(Address(1), mallory, 1'000 + k);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  }
  grpc::Status next = HostilePush(Address(1), mallory, 1);
  EXPECT_EQ(next.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << next.error_message();
  EXPECT_EQ(groups_[1]->pushes_refused(), 17u);
  EXPECT_EQ(groups_[1]->early_bytes(), 0u);
  const uint64_t rss_after = RssBytes();
  std::cout << "FIGURE hostile_push_rss_growth_mb="
            << (static_cast<double>(rss_after) - static_cast<double>(rss_before)) / 1e6
            << std::endl;
  // 17 pushes of 128 MiB: far less than one of them may stay resident.
  EXPECT_LT(rss_after, rss_before + (uint64_t{64} << 20));
  EXPECT_TRUE(HonestRound(1));
}

}  // namespace
}  // namespace skipswarm::node
