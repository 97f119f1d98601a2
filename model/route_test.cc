#include "model/route.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
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

TEST(RouteTest, BalancedSkipRoutesKeepVisitCountsWithinOne) {
  common::Random a(7), b(7);
  std::map<std::vector<int>, int> first_routes;
  for (int it = 0; it < 400; ++it) {
    // 2 routes x 3 of 5 non-zero stages: one stage twice, the others once.
    std::vector<std::vector<int>> routes = BalancedSkipRoutes(6, 0.33, 2, a);
    ASSERT_EQ(routes, BalancedSkipRoutes(6, 0.33, 2, b));
    ASSERT_EQ(routes.size(), 2u);
    std::vector<int> visits(6, 0);
    for (const auto& r : routes) {
      ASSERT_EQ(r.size(), 4u);
      EXPECT_TRUE(ValidateRoute(r, 6).ok());
      EXPECT_EQ(CountSwaps(r), 0);
      for (int s : r) ++visits[s];
    }
    EXPECT_EQ(visits[0], 2);
    EXPECT_EQ(*std::min_element(visits.begin() + 1, visits.end()), 1);
    EXPECT_EQ(*std::max_element(visits.begin() + 1, visits.end()), 2);
    ++first_routes[routes[0]];
  }
  // The first route is uniform over the C(5,3) = 10 subsets (400 draws,
  // expected 40 each; a bias towards some stages would show up here).
  EXPECT_EQ(first_routes.size(), 10u);
  for (const auto& [route, n] : first_routes) EXPECT_GT(n, 15);

  // 7 routes x 2 of 5: counts 2 or 3 for every stage; skip 0: full routes.
  std::vector<int> visits(6, 0);
  for (const auto& r : BalancedSkipRoutes(6, 0.5, 7, a)) {
    for (int s : r) ++visits[s];
  }
  for (int s = 1; s < 6; ++s) EXPECT_TRUE(visits[s] == 2 || visits[s] == 3) << s;
  EXPECT_EQ(BalancedSkipRoutes(6, 0.0, 3, a), std::vector<std::vector<int>>(3, FullRoute(6)));
}

}  // namespace
}  // namespace skipswarm::model
