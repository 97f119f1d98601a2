// Note [Peer quotas] on a pipeline stream: every message the server reads
// is paid for, whether or not it belongs to a frame it admitted.
#include <cstdint>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "common/peer_quota.h"
#include "common/real_clock.h"
#include "common/sim_clock.h"
#include "gtest/gtest.h"
#include "identity/tls_credentials.h"
#include "node/transport/grpc_streams.h"
#include "node/transport/grpc_transport.h"
#include "node/transport/test_util.h"
#include "proto/pipeline.grpc.pb.h"

namespace skipswarm::node {
namespace {

using ::skipswarm::node::testutil::MakeTestFrame;

constexpr uint64_t kChunkBytes = 16 << 10;
// Far more than any budget below admits: a stream still open after this
// many bytes was never charged for them.
constexpr uint64_t kGiveUpBytes = uint64_t{256} << 20;

class StreamQuotaTest : public ::testing::Test {
 protected:
  StreamQuotaTest() : clock_(common::RealClock::Create()) {
    common::PeerQuotaOptions q;
    q.service = "pipeline";
    // 100 messages and 1 MiB: the buckets do not refill while the test
    // runs (its clock stands still).
    q.stranger = {1, 100, 1, 1 << 20, 1};
    quota_ = std::make_shared<common::PeerQuota>(q, &quota_clock_);
    quota_->SetClassifier([](const PeerId&) { return common::PeerClass::kStranger; });
    GrpcTransportOptions options;
    options.self = PeerId::ForName("c");
    options.swarm_id = testutil::kTestSwarm;
    options.credentials = identity::PeerCredentials::Insecure();
    options.quota = quota_;
    server_ = GrpcTransport::Create(options, clock_.get()).value();
    stub_ = proto::PipelineService::NewStub(
        grpc::CreateChannel(server_->loopback_address(), grpc::InsecureChannelCredentials()));
  }

  // Writes `message` until the server ends the stream or kGiveUpBytes are
  // written; returns the stream's final status.
  grpc::Status Flood(const proto::PipelineMessage& message) {
    grpc::ClientContext context;
    context.AddMetadata(internal::kNodeIdMetadata, stranger_.Hex());
    auto stream = stub_->Stream(&context);
    uint64_t written = 0;
    while (written < kGiveUpBytes && stream->Write(message)) written += message.ByteSizeLong();
    stream->WritesDone();
    proto::FrameAck ack;
    while (stream->Read(&ack)) {
    }
    return stream->Finish();
  }

  std::unique_ptr<common::RealClock> clock_;
  common::SimClock quota_clock_;
  std::shared_ptr<common::PeerQuota> quota_;
  std::unique_ptr<GrpcTransport> server_;
  std::unique_ptr<proto::PipelineService::Stub> stub_;
  const PeerId stranger_ = PeerId::ForName("stranger");
};

TEST_F(StreamQuotaTest, ChunksWithoutAHeaderPayTheirBytes) {
  proto::PipelineMessage chunk;
  chunk.mutable_chunk()->set_data(std::string(kChunkBytes, 'x'));
  grpc::Status end = Flood(chunk);
  EXPECT_EQ(end.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << end.error_message();
  EXPECT_EQ((quota_->refusals()[{common::QuotaReason::kBytes, common::PeerClass::kStranger}]),
            1u);
}

TEST_F(StreamQuotaTest, HeadersTheValidatorRefusesPayTheirMessage) {
  Frame frame = MakeTestFrame({stranger_, PeerId::ForName("c"), stranger_}, 1, 10);
  frame.header.set_swarm_id("another swarm");  // refused by the validator
  proto::PipelineMessage header;
  *header.mutable_header() = frame.header;
  grpc::Status end = Flood(header);
  EXPECT_EQ(end.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << end.error_message();
  EXPECT_EQ(
      (quota_->refusals()[{common::QuotaReason::kMessages, common::PeerClass::kStranger}]), 1u);
}

TEST_F(StreamQuotaTest, ChunksOfARefusedFramePayTheirBytes) {
  Frame frame = MakeTestFrame({stranger_, PeerId::ForName("c"), stranger_}, 1, 10);
  frame.header.set_swarm_id("another swarm");
  proto::PipelineMessage header;
  *header.mutable_header() = frame.header;
  grpc::ClientContext context;
  context.AddMetadata(internal::kNodeIdMetadata, stranger_.Hex());
  auto stream = stub_->Stream(&context);
  ASSERT_TRUE(stream->Write(header));  // refused: what follows is skipped
  proto::PipelineMessage chunk;
  chunk.mutable_chunk()->set_data(std::string(kChunkBytes, 'x'));
  uint64_t written = 0;
  while (written < kGiveUpBytes && stream->Write(chunk)) written += chunk.ByteSizeLong();
  stream->WritesDone();
  proto::FrameAck ack;
  while (stream->Read(&ack)) {
  }
  grpc::Status end = stream->Finish();
  EXPECT_EQ(end.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << end.error_message();
  EXPECT_EQ((quota_->refusals()[{common::QuotaReason::kBytes, common::PeerClass::kStranger}]),
            1u);
}

}  // namespace
}  // namespace skipswarm::node
