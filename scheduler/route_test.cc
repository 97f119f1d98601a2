#include "scheduler/route.h"

#include "gtest/gtest.h"
#include "scheduler/route_search.h"
#include "scheduler/test_views.h"

namespace skipswarm::scheduler {
namespace {

using testing::MakeRoute;
using testing::UniformView;

TEST(RouteRulesTest, AdjacentSwapsAndJumps) {
  EXPECT_TRUE(StagesObeyRules({1, 2, 3}, 2, 4));
  EXPECT_TRUE(StagesObeyRules({1, 3, 2}, 2, 4));
  EXPECT_TRUE(StagesObeyRules({1, 5, 4}, 2, 4));
  EXPECT_TRUE(StagesObeyRules({2, 1, 4, 3}, 2, 4));
  EXPECT_FALSE(StagesObeyRules({2, 1, 4, 3}, 1, 4));   // two swaps
  EXPECT_FALSE(StagesObeyRules({3, 2, 1}, 2, 4));      // 3 before 1
  EXPECT_FALSE(StagesObeyRules({1, 6}, 2, 4));         // jump of 5
  EXPECT_FALSE(StagesObeyRules({5, 4}, 2, 4));         // 0 -> 5
  EXPECT_FALSE(StagesObeyRules({1, 3, 2}, 0, 4));      // noskip rules
}

TEST(RouteRulesTest, ValidateRouteNamesTheProblem) {
  TopologyView view = UniformView({1, 1, 1, 1}, 1.0, 0.5, 1);  // d0 1 2 3
  Workload w;
  w.path_length = 3;
  EXPECT_TRUE(ValidateRoute(view, w, MakeRoute(0, {0, 1, 2, 0}), 3).ok());
  EXPECT_TRUE(ValidateRoute(view, w, MakeRoute(0, {0, 2, 1, 0}), 3).ok());
  auto st = ValidateRoute(view, w, MakeRoute(0, {0, 1, 0}), 3);
  EXPECT_NE(st.message().find("visits 2 stages"), std::string::npos) << st;
  st = ValidateRoute(view, w, MakeRoute(0, {0, 3, 1, 0}), 3);
  EXPECT_NE(st.message().find("swap/jump"), std::string::npos) << st;
  st = ValidateRoute(view, w, MakeRoute(0, {0, 1, 1, 0}), 3);
  EXPECT_NE(st.message().find("twice"), std::string::npos) << st;
  Route bad = MakeRoute(0, {0, 1, 2, 1});
  EXPECT_FALSE(ValidateRoute(view, w, bad, 3).ok());
}

TEST(RouteRulesTest, BalanceRangeIsTenPercentOfTheMean) {
  TopologyView view = UniformView({1, 1, 1, 1, 1, 1}, 1.0, 0.5, 1);
  Workload w;
  VisitRange r = BalanceRange(view, w, 90);  // mean 18
  EXPECT_EQ(r.min, 17);
  EXPECT_EQ(r.max, 19);
}

TEST(RouteSearchTest, FindsCheapestRouteAndHonoursPenalties) {
  TopologyView view = UniformView({1, 2, 1}, 1.0, 0.5, 1);  // d0 | 1 2 | 3
  Workload w;
  w.path_length = 3;
  RouteSearcher searcher(view, w);
  auto best = searcher.Best(0, {});
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->nodes, (std::vector<int>{0, 1, 3, 0}));
  EXPECT_EQ(best->latency_s, RouteLatency(view, best->nodes));
  std::vector<double> penalty(view.num_nodes(), 0);
  penalty[1] = 10;
  RouteSearcher::Query q;
  q.node_penalty = &penalty;
  best = searcher.Best(0, q);
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->nodes, (std::vector<int>{0, 2, 3, 0}));
}

TEST(RouteSearchTest, CompletesAPrefixAvoidingADeadNode) {
  TopologyView view = UniformView({1, 1, 2, 1}, 1.0, 0.5, 1);  // d0 1 | 2 3 | 4
  Workload w;
  w.path_length = 4;
  RouteSearcher searcher(view, w);
  std::vector<double> penalty(view.num_nodes(), 0);
  penalty[2] = kNoLink;  // dead
  RouteSearcher::Query q;
  q.node_penalty = &penalty;
  auto rest = searcher.BestCompletion({0, 1}, q);
  ASSERT_TRUE(rest.has_value());
  EXPECT_EQ(rest->nodes, (std::vector<int>{0, 1, 3, 4, 0}));
}

}  // namespace
}  // namespace skipswarm::scheduler
