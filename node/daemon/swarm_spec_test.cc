#include "node/daemon/swarm_spec.h"

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

}  // namespace
}  // namespace skipswarm::node
