#include "node/daemon/stack/swarm_spec.h"

#include "gtest/gtest.h"

namespace skipswarm::node {
namespace {

TEST(SwarmSpecTest, ParsesEntries) {
  auto s = ParseSwarmSpec("d0/0/127.0.0.1:1/127.0.0.1:2, r1/1+2/h:3/h:4", 3, 5);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ((*s)[1].info.stages, (std::vector<int>{1, 2}));
  EXPECT_EQ((*s)[1].info.group_address, "h:4");
  EXPECT_EQ((*s)[0].info.memory_slots, 5);
  EXPECT_EQ((*s)[0].info.id, common::NodeId::ForName("d0"));
  EXPECT_EQ(FormatSwarmEntry("r1", {1, 2}, "h:3", "h:4"), "r1/1+2/h:3/h:4");
}

TEST(SwarmSpecTest, ErrorsNameTheEntry) {
  auto bad = ParseSwarmSpec("d0/0/a:1", 2, 4);
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status()));
  EXPECT_NE(bad.status().message().find("d0/0/a:1"), std::string::npos);
  EXPECT_FALSE(ParseSwarmSpec("d0/0/a:1/a:2,d0/1/b:1/b:2", 2, 4).ok());
  EXPECT_FALSE(ParseSwarmSpec("d0/0/a:1/a:2,r/7/b:1/b:2", 2, 4).ok());
  auto missing = ParseSwarmSpec("d0/0/a:1/a:2", 2, 4);
  EXPECT_NE(missing.status().message().find("stage 1"), std::string::npos);
  EXPECT_FALSE(ParseSwarmSpec("r/1/a:1/a:2", 2, 4).ok());
}

TEST(SwarmSpecTest, AnEntryMayPinItsNodeId) {
  const std::string hex(64, 'a');
  auto s = ParseSwarmSpec("d0/0/h:1/h:2/" + hex + ",r1/1/h:3/h:4", 2, 4);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE((*s)[0].pinned);
  EXPECT_EQ((*s)[0].info.id, common::NodeId::FromHex(hex).value());
  EXPECT_FALSE((*s)[1].pinned);
  EXPECT_EQ((*s)[1].info.id, common::NodeId::ForName("r1"));
  EXPECT_EQ(FormatSwarmEntry("d0", {0}, "h:1", "h:2", hex), "d0/0/h:1/h:2/" + hex);
  // Upper case is the same id.
  auto upper = ParseSwarmSpec("d0/0/h:1/h:2/" + std::string(64, 'A') + ",r1/1/h:3/h:4", 2, 4);
  ASSERT_TRUE(upper.ok());
  EXPECT_EQ((*upper)[0].info.id, (*s)[0].info.id);
}

TEST(SwarmSpecTest, MalformedNodeIdsAreRefusedByName) {
  for (const std::string& id :
       {std::string(63, 'a'), std::string(65, 'a'), std::string(63, 'a') + "g", std::string(""),
        std::string("d0")}) {
    const std::string entry = "d0/0/h:1/h:2/" + id;
    auto bad = ParseSwarmSpec(entry + ",r1/1/h:3/h:4", 2, 4);
    ASSERT_TRUE(absl::IsInvalidArgument(bad.status())) << id;
    EXPECT_NE(bad.status().message().find("'" + entry + "'"), std::string::npos) << bad.status();
    EXPECT_NE(bad.status().message().find("64 hex digits"), std::string::npos) << bad.status();
  }
  // Six fields, and one key's id on two entries.
  EXPECT_TRUE(absl::IsInvalidArgument(
      ParseSwarmSpec("d0/0/h:1/h:2/" + std::string(64, 'a') + "/x,r1/1/h:3/h:4", 2, 4).status()));
  auto twice = ParseSwarmSpec(
      "d0/0/h:1/h:2/" + std::string(64, 'b') + ",r1/1/h:3/h:4/" + std::string(64, 'B'), 2, 4);
  EXPECT_TRUE(absl::IsInvalidArgument(twice.status()));
  EXPECT_NE(twice.status().message().find("already used"), std::string::npos) << twice.status();
}

TEST(SwarmSpecTest, AnEntryMayMarkASubnetworkMember) {
  // A pipeline of 3 stages and an SDP worker on {0, 2}.
  auto s = ParseSwarmSpec("d0/0/h:1/h:2,r1/1/h:3/h:4,r2/2/h:5/h:6,w0/sdp:2+0/h:7/h:8", 3, 4);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE((*s)[0].info.subnetwork);
  EXPECT_TRUE((*s)[3].info.subnetwork);
  EXPECT_EQ((*s)[3].info.stages, (std::vector<int>{0, 2}));
  EXPECT_EQ(FormatSwarmEntry("w0", {0, 2}, "h:7", "h:8", "", true), "w0/sdp:0+2/h:7/h:8");
  // Subnetwork members only: a pure SDP swarm.
  EXPECT_TRUE(ParseSwarmSpec("w0/sdp:0+1+2/h:1/h:2,w1/sdp:0+2/h:3/h:4", 3, 4).ok());
}

TEST(SwarmSpecTest, BadSubnetworkEntriesAreRefusedByName) {
  // Without the last stage.
  auto no_last = ParseSwarmSpec("d0/0/h:1/h:2,r1/1/h:3/h:4,r2/2/h:5/h:6,w0/sdp:0+1/h:7/h:8", 3, 4);
  ASSERT_TRUE(absl::IsInvalidArgument(no_last.status()));
  EXPECT_NE(no_last.status().message().find("'w0/sdp:0+1/h:7/h:8'"), std::string::npos);
  EXPECT_NE(no_last.status().message().find("stage 0 and the last stage 2"), std::string::npos)
      << no_last.status();
  // A stage twice; an empty subnetwork; an unknown marker.
  EXPECT_TRUE(absl::IsInvalidArgument(
      ParseSwarmSpec("w0/sdp:0+2+2/h:1/h:2", 3, 4).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseSwarmSpec("w0/sdp:/h:1/h:2", 3, 4).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseSwarmSpec("w0/spd:0+2/h:1/h:2", 3, 4).status()));
  // Stage 1 hosted by the subnetwork member only: no pipeline route can
  // pass it.
  auto gap = ParseSwarmSpec("d0/0/h:1/h:2,r2/2/h:5/h:6,w0/sdp:0+1+2/h:7/h:8", 3, 4);
  ASSERT_TRUE(absl::IsInvalidArgument(gap.status()));
  EXPECT_NE(gap.status().message().find("no pipeline node hosts stage 1"), std::string::npos)
      << gap.status();
  EXPECT_NE(gap.status().message().find("never a pipeline hop"), std::string::npos);
}

}  // namespace
}  // namespace skipswarm::node
