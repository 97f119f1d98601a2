#include "model/route.h"

#include <gtest/gtest.h>

#include <set>

namespace skipswarm::model {
namespace {

TEST(RouteTest, ValidatesStructure) {
  EXPECT_TRUE(ValidateRoute({0, 1, 2, 3}, 4).ok());
  EXPECT_TRUE(ValidateRoute({0}, 4).ok());
  EXPECT_TRUE(ValidateRoute({0, 2, 1, 3}, 4).ok());
  EXPECT_FALSE(ValidateRoute({}, 4).ok());
  EXPECT_FALSE(ValidateRoute({1, 2}, 4).ok());
  EXPECT_FALSE(ValidateRoute({0, 1, 1}, 4).ok());
  EXPECT_FALSE(ValidateRoute({0, 4}, 4).ok());
  EXPECT_FALSE(ValidateRoute({0, 0}, 4).ok());
}

TEST(RouteTest, AppliesDesignLimits) {
  RouteLimits lim = RouteLimits::DesignDefaults();
  EXPECT_TRUE(ValidateRoute({0, 2, 1, 4, 3}, 6, lim).ok());
  EXPECT_EQ(CountSwaps({0, 2, 1, 4, 3}), 2);
  EXPECT_FALSE(ValidateRoute({0, 3, 1}, 6, lim).ok());            // not adjacent
  EXPECT_FALSE(ValidateRoute({0, 2, 1, 4, 3, 6, 5}, 8, lim).ok());  // 3 swaps
  EXPECT_FALSE(ValidateRoute({0, 5}, 6, lim).ok());               // jump of 5
}

TEST(RouteTest, RandomSkipRouteHasRightLengthAndIsDeterministic) {
  common::Random a(7), b(7);
  std::set<std::vector<int>> seen;
  for (int i = 0; i < 50; ++i) {
    std::vector<int> r = RandomSkipRoute(6, 0.33, a);
    EXPECT_EQ(r, RandomSkipRoute(6, 0.33, b));
    ASSERT_EQ(r.size(), 4u);
    EXPECT_TRUE(ValidateRoute(r, 6).ok());
    EXPECT_EQ(CountSwaps(r), 0);
    seen.insert(r);
  }
  EXPECT_GT(seen.size(), 3u);
  EXPECT_EQ(RandomSkipRoute(6, 0.0, a), FullRoute(6));
}

}  // namespace
}  // namespace skipswarm::model
