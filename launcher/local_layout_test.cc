#include "launcher/local_layout.h"

#include <map>
#include <set>
#include <string>

#include "gtest/gtest.h"

namespace skipswarm::launcher {
namespace {

TEST(LocalLayoutTest, PipelineSwarmHasDataNodesThenReplicasOfEveryOtherStage) {
  LayoutOptions o;
  o.num_stages = 3;
  o.data_nodes = 2;
  o.replicas = 2;
  absl::StatusOr<LocalSwarmLayout> l = MakeLocalLayout(o);
  ASSERT_TRUE(l.ok()) << l.status();
  const LocalLayout want = {{"d0", {0}},   {"d1", {0}},   {"s1r0", {1}},
                            {"s1r1", {1}}, {"s2r0", {2}}, {"s2r1", {2}}};
  EXPECT_EQ(l->nodes, want);
  EXPECT_TRUE(l->sdp.empty());
  EXPECT_EQ(l->pipeline_data_nodes, 2);
}

TEST(LocalLayoutTest, SdpSwarmHasOneNodePerSubnetwork) {
  LayoutOptions o;
  o.num_stages = 6;
  o.sdp = {model::SdpMode::kForward, 4, 0.5};
  absl::StatusOr<LocalSwarmLayout> l = MakeLocalLayout(o);
  ASSERT_TRUE(l.ok()) << l.status();
  const LocalLayout want = {
      {"w0", {0, 1, 5}}, {"w1", {0, 2, 5}}, {"w2", {0, 3, 5}}, {"w3", {0, 4, 5}}};
  EXPECT_EQ(l->nodes, want);
  EXPECT_EQ(l->sdp.size(), 4u);
  EXPECT_EQ(l->pipeline_data_nodes, 0);
}

TEST(LocalLayoutTest, MixedSwarmHasThePipelineThenTheSdpNodes) {
  LayoutOptions o;
  o.num_stages = 4;
  o.data_nodes = 1;
  o.replicas = 1;
  o.sdp = {model::SdpMode::kBackward, 2, 0.75};
  o.mixed = true;
  absl::StatusOr<LocalSwarmLayout> l = MakeLocalLayout(o);
  ASSERT_TRUE(l.ok()) << l.status();
  const LocalLayout want = {{"d0", {0}},   {"s1r0", {1}},        {"s2r0", {2}},
                            {"s3r0", {3}}, {"w0", {0, 1, 3}}, {"w1", {0, 2, 3}}};
  EXPECT_EQ(l->nodes, want);
  EXPECT_EQ(l->sdp, (std::set<std::string>{"w0", "w1"}));
  EXPECT_EQ(l->pipeline_data_nodes, 1);
  o.sdp.mode = model::SdpMode::kOff;
  EXPECT_EQ(MakeLocalLayout(o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(LocalLayoutTest, CapsNameKnownNodesAndWellFormedRates) {
  const LocalLayout nodes = {{"d0", {0}}, {"s1r0", {1}}};
  std::map<std::string, std::string> extra;
  ASSERT_TRUE(AddLinkCaps("s1r0@2.5", "local_caps", {"max_upload_mbps", "max_download_mbps"},
                          nodes, &extra)
                  .ok());
  EXPECT_EQ(extra["s1r0"], "\"max_upload_mbps\": 2.5,\n  \"max_download_mbps\": 2.5");
  EXPECT_EQ(AddLinkCaps("x9@1", "local_caps", {"k"}, nodes, &extra).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AddLinkCaps("d0@0", "local_caps", {"k"}, nodes, &extra).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AddLinkCaps("d0", "local_sync_caps", {"k"}, nodes, &extra).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(LocalLayoutTest, NodeConfigAddsQuotedKeysToKnownNodes) {
  const LocalLayout nodes = {{"d0", {0}}, {"s1r2", {1}}};
  std::map<std::string, std::string> extra;
  ASSERT_TRUE(AddNodeConfig("s1r2:poison=signflip:8,s1r2:avg_ban_after=0", nodes, &extra).ok());
  EXPECT_EQ(extra["s1r2"], "\"poison\": \"signflip:8\",\n  \"avg_ban_after\": \"0\"");
  EXPECT_EQ(AddNodeConfig("x9:k=v", nodes, &extra).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AddNodeConfig("d0:k", nodes, &extra).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AddNodeConfig("d0:k=\"v", nodes, &extra).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace skipswarm::launcher
