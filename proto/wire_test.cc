// Checks that the wire contracts compile into usable C++ and that the
// protocol-version rule behaves as documented.
#include "gtest/gtest.h"
#include "proto/gossip.pb.h"
#include "proto/health.grpc.pb.h"
#include "proto/pipeline.grpc.pb.h"
#include "proto/stage.grpc.pb.h"
#include "proto/version.h"

namespace skipswarm::proto {
namespace {

TEST(WireTest, FrameHeaderRoundTrips) {
  FrameHeader h;
  h.set_protocol_version(kProtocolVersion);
  h.set_iteration(12);
  h.set_mb_id(3);
  h.set_direction(DIRECTION_FORWARD);
  Hop* hop = h.add_route();
  hop->set_node_id(std::string(32, 'a'));
  hop->set_stage(0);
  h.mutable_tensor()->set_codec(CODEC_FP16);
  h.mutable_tensor()->add_shape(4);
  h.mutable_tensor()->add_shape(128);
  std::string bytes = h.SerializeAsString();

  FrameHeader back;
  ASSERT_TRUE(back.ParseFromString(bytes));
  EXPECT_EQ(back.iteration(), 12u);
  EXPECT_EQ(back.route_size(), 1);
  EXPECT_EQ(back.tensor().shape(1), 128);
  EXPECT_EQ(back.tensor().codec(), CODEC_FP16);
}

TEST(WireTest, GarbageDoesNotParseAsAFrame) {
  FrameHeader h;
  EXPECT_FALSE(h.ParseFromString(std::string("\xff\xff\xff\xff\xff", 5)));
}

TEST(WireTest, ProtocolVersionCheck) {
  EXPECT_TRUE(CheckProtocolVersion(kProtocolVersion).ok());
  absl::Status old = CheckProtocolVersion(0);
  EXPECT_EQ(old.code(), absl::StatusCode::kFailedPrecondition);
  absl::Status newer = CheckProtocolVersion(7);
  EXPECT_EQ(newer.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(newer.message().find("v7"), std::string::npos);
}

TEST(WireTest, SignedRecordCarriesSerializedRecord) {
  NodeRecord r;
  r.set_node_id(std::string(32, 'x'));
  r.add_stages(2);
  r.set_memory_slots(3);
  r.set_incarnation(5);
  (*r.mutable_stage_digests())[2] = 0xabcdef;
  SignedNodeRecord s;
  s.set_record(r.SerializeAsString());
  NodeRecord back;
  ASSERT_TRUE(back.ParseFromString(s.record()));
  EXPECT_EQ(back.incarnation(), 5u);
  EXPECT_EQ(back.stage_digests().at(2), 0xabcdefu);
}

TEST(WireTest, ServiceNamesAreStable) {
  // Peers and probes address services by these names.
  EXPECT_STREQ(PipelineService::service_full_name(), "skipswarm.proto.PipelineService");
  EXPECT_STREQ(StageService::service_full_name(), "skipswarm.proto.StageService");
  EXPECT_STREQ(grpc::health::v1::Health::service_full_name(), "grpc.health.v1.Health");
}

}  // namespace
}  // namespace skipswarm::proto
