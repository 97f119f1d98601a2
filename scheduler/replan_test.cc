#include "scheduler/replan.h"

#include "gtest/gtest.h"
#include "scheduler/evaluator.h"
#include "scheduler/route_search.h"
#include "scheduler/test_views.h"

namespace skipswarm::scheduler {
namespace {

using testing::MakeRoute;
using testing::UniformView;

// d0 | 1 2 | 3 4 ; every hop 0.5 s except where set.
TopologyView View() { return UniformView({1, 2, 2}, 1.0, 0.5, 2); }

TEST(ReplanTest, DeadNodeIsReplacedByAReplicaOnlyWhereUsed) {
  TopologyView view = View();
  Workload w;
  w.path_length = 3;
  w.mb_per_data_node = 3;
  Plan plan{"test",
            {MakeRoute(0, {0, 1, 3, 0}), MakeRoute(1, {0, 2, 4, 0}),
             MakeRoute(2, {0, 1, 4, 0})}};
  auto r = ReplanWithoutNode(view, w, plan, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rerouted, (std::vector<int>{0, 2}));
  EXPECT_EQ(r->plan.routes[0].nodes, (std::vector<int>{0, 2, 3, 0}));
  EXPECT_EQ(r->plan.routes[1].nodes, plan.routes[1].nodes);
  EXPECT_EQ(r->plan.routes[2].nodes, (std::vector<int>{0, 2, 4, 0}));
  EXPECT_FALSE(r->view.alive(1));
  EXPECT_TRUE(ValidatePlan(r->view, w, r->plan, 3).ok());
}

TEST(ReplanTest, LastNodeOfAStageIsSkippedWhenTheRulesAllow) {
  TopologyView view = UniformView({1, 1, 2}, 1.0, 0.5, 2);  // d0 | 1 | 2 3
  Workload w;
  w.path_length = 3;
  Plan plan{"test", {MakeRoute(0, {0, 1, 2, 0})}};
  auto r = ReplanWithoutNode(view, w, plan, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->plan.routes[0].nodes, (std::vector<int>{0, 2, 0}));
}

TEST(ReplanTest, DeadOriginDropsItsMicroBatches) {
  TopologyView view = UniformView({2, 1}, 1.0, 0.5, 2);
  Workload w;
  w.path_length = 2;
  Plan plan{"test", {MakeRoute(0, {0, 2, 0}), MakeRoute(1, {1, 2, 1})}};
  auto r = ReplanWithoutNode(view, w, plan, 0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->dropped, std::vector<int>{0});
  EXPECT_EQ(r->plan.routes.size(), 1u);
}

TEST(ReplanTest, InFlightTakesTheCheapestLiveCompletion) {
  // Make replica 4 of stage 2 slow to reach: the in-flight MB at node 1
  // whose next hop 3 died should go to 4 only if nothing better exists.
  TopologyView view = View();
  Workload w;
  w.path_length = 3;
  Route route = MakeRoute(5, {0, 1, 3, 0});
  auto fixed = RerouteInFlight(view, w, route, 1, 3);
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  EXPECT_EQ(fixed->nodes, (std::vector<int>{0, 1, 4, 0}));
  EXPECT_EQ(fixed->mb, 5);
  // At the origin (hop 0) the whole route may change.
  fixed = RerouteInFlight(view, w, route, 0, 1);
  ASSERT_TRUE(fixed.ok());
  EXPECT_EQ(fixed->nodes.front(), 0);
  EXPECT_NE(fixed->nodes[1], 1);
  EXPECT_TRUE(ValidateRoute(view, w, *fixed, 3).ok());
}

TEST(ReplanTest, InFlightErrors) {
  TopologyView view = View();
  Workload w;
  w.path_length = 3;
  Route route = MakeRoute(0, {0, 1, 3, 0});
  EXPECT_EQ(RerouteInFlight(view, w, route, 1, 4).status().code(),
            absl::StatusCode::kInvalidArgument);  // 4 is not the next hop
  EXPECT_EQ(RerouteInFlight(view, w, route, 2, 0).status().code(),
            absl::StatusCode::kAborted);  // origin died
  EXPECT_EQ(RerouteInFlight(view, w, route, 5, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace skipswarm::scheduler
