#include "model/route_record.h"

#include "gtest/gtest.h"

namespace skipswarm::model {
namespace {

TEST(RouteRecordTest, FormatParsesBackSortedByMicroBatch) {
  RecordedRoute a{.iteration = 2, .global_mb = 9, .origin = "d1", .nodes = {"ab", "cd"},
                  .stages = {0, 3}};
  RecordedRoute b{.iteration = 2, .global_mb = 8, .origin = "d0", .nodes = {"ef", "01", "23"},
                  .stages = {0, 1, 2}};
  EXPECT_EQ(FormatRecordedRoute(a), "2 9 d1 ab/0 cd/3\n");
  RouteRecord r;
  ASSERT_TRUE(ParseRouteRecord("# header\n" + FormatRecordedRoute(a) + FormatRecordedRoute(b),
                               &r).ok());
  ASSERT_EQ(r.size(), 1u);
  ASSERT_EQ(r[2].size(), 2u);
  EXPECT_EQ(r[2][0].global_mb, 8u);
  EXPECT_EQ(r[2][0].origin, "d0");
  EXPECT_EQ(r[2][0].stages, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(r[2][0].nodes, (std::vector<std::string>{"ef", "01", "23"}));
  EXPECT_EQ(r[2][1].stages, (std::vector<int>{0, 3}));
}

TEST(RouteRecordTest, SwappedStagesKeepTheirVisitingOrder) {
  // A skip route of the skippipe planner may swap adjacent stages; the
  // replay must train them in the order the swarm ran them.
  RecordedRoute a{.iteration = 0, .global_mb = 3, .origin = "d0", .nodes = {"a", "b", "c", "d"},
                  .stages = {0, 1, 5, 4}};
  RouteRecord r;
  ASSERT_TRUE(ParseRouteRecord(FormatRecordedRoute(a), &r).ok());
  EXPECT_EQ(r[0][0].stages, (std::vector<int>{0, 1, 5, 4}));
}

TEST(RouteRecordTest, TheLaterLineForAMicroBatchWins) {
  RouteRecord r;
  ASSERT_TRUE(ParseRouteRecord("0 1 d0 x/0 y/1 z/2\n0 1 d0 x/0 z/2\n", &r).ok());
  ASSERT_EQ(r[0].size(), 1u);
  EXPECT_EQ(r[0][0].stages, (std::vector<int>{0, 2}));
}

TEST(RouteRecordTest, ErrorsNameTheLine) {
  RouteRecord r;
  EXPECT_EQ(ParseRouteRecord("0 1 d0 x/0\n0 2 d0 x/1 y/2\n", &r).message(),
            "route record line 2: a route starts on stage 0");
  EXPECT_EQ(ParseRouteRecord("0 1 d0 x0\n", &r).message(),
            "route record line 1: bad hop 'x0' (NODE/STAGE)");
  EXPECT_FALSE(ParseRouteRecord("0 1 d0\n", &r).ok());
  EXPECT_FALSE(ParseRouteRecord("-1 1 d0 x/0\n", &r).ok());
  EXPECT_FALSE(ParseRouteRecord("0 x d0 x/0\n", &r).ok());
  EXPECT_FALSE(ParseRouteRecord("0 1 d0 /0\n", &r).ok());
  EXPECT_TRUE(absl::IsNotFound(ReadRouteRecord({"/nonexistent/r.routes"}).status()));
}

}  // namespace
}  // namespace skipswarm::model
