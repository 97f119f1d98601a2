#include "node/daemon/stack/routes_file_planner.h"

#include "gtest/gtest.h"

namespace skipswarm::node {
namespace {

TEST(RoutesFilePlannerTest, ReplaysEachOriginsRoutes) {
  std::map<std::string, PeerId> ids;
  for (const char* n : {"d0", "d1", "a", "b"}) ids[n] = PeerId::ForName(n);
  auto p = RoutesFilePlanner::Parse(
      "# two origins\nd0 0 d0/0 a/1 b/2\nd1 -1 d1/0 b/2\nd0 3 priority=4 d0/0 b/1 a/2  # swap\n", ids);
  ASSERT_TRUE(p.ok()) << p.status();
  StaticSwarmView view({});
  auto d0 = (*p)->Plan({.iteration = 5, .self = ids["d0"], .mbs = 2, .num_stages = 3}, view);
  ASSERT_TRUE(d0.ok());
  ASSERT_EQ(d0->size(), 2u);
  EXPECT_EQ((*d0)[1].index, 1);
  EXPECT_EQ((*d0)[1].data_slot, 3);
  EXPECT_EQ((*d0)[1].priority, 4);
  EXPECT_EQ((*d0)[0].priority, 0);
  ASSERT_EQ((*d0)[1].hops.size(), 3u);
  EXPECT_EQ((*d0)[1].hops[1].node, ids["b"]);
  EXPECT_EQ((*d0)[1].hops[1].stage, 1);
  EXPECT_EQ((*p)->Plan({.self = ids["d1"]}, view)->size(), 1u);
  EXPECT_TRUE((*p)->Plan({.self = ids["a"]}, view)->empty());
}

TEST(RoutesFilePlannerTest, ErrorsNameTheLine) {
  std::map<std::string, PeerId> ids = {{"d0", PeerId::ForName("d0")}};
  EXPECT_EQ(RoutesFilePlanner::Parse("d0 0 d0/0 x/1\n", ids).status().message(),
            "routes file line 1: bad hop 'x/1' (NAME/STAGE of a known node)");
  EXPECT_FALSE(RoutesFilePlanner::Parse("d0 0 d0/1 d0/0\n", ids).ok());
  EXPECT_FALSE(RoutesFilePlanner::Parse("d0 0\n", ids).ok());
  EXPECT_FALSE(RoutesFilePlanner::Parse("d0 0 priority=x d0/0 d0/1\n", ids).ok());
  EXPECT_FALSE(RoutesFilePlanner::Parse("d0 0 priority=1 d0/0\n", ids).ok());
}

}  // namespace
}  // namespace skipswarm::node
