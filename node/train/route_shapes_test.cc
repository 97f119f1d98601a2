// Note [Route shapes] (data_node_driver.h): completed micro-batches are
// counted by the shape of the route their tail came back along.
#include <memory>

#include "gtest/gtest.h"
#include "node/compute/timed_stage_compute.h"
#include "node/train/data_source.h"
#include "node/train/test_swarm.h"

namespace skipswarm::node {
namespace {

TEST(RouteShapeTest, ClassifiesSkipsAndSwaps) {
  EXPECT_STREQ(RouteShapeOf({1, 2, 3}, 4), "in_order");
  EXPECT_STREQ(RouteShapeOf({1, 3}, 4), "skip");
  EXPECT_STREQ(RouteShapeOf({2, 1, 3}, 4), "swap");
  EXPECT_STREQ(RouteShapeOf({3, 1}, 4), "skip_swap");
  EXPECT_STREQ(RouteShapeOf({}, 1), "in_order");  // a one-stage model
}

// Plans MB 0 in order, MB 1 skipping stage 2, MB 2 swapping stages 1 and
// 2, MB 3 skipping stage 1 with 3 before 2.
class ShapedPlanner final : public RoutePlanner {
 public:
  std::string name() const override { return "shaped"; }
  absl::StatusOr<std::vector<PlannedRoute>> Plan(const PlanInput& input,
                                                 const SwarmView& view) override {
    const std::vector<std::vector<int>> shapes = {{1, 2, 3}, {1, 3}, {2, 1, 3}, {3, 2}};
    std::vector<PlannedRoute> routes;
    for (int j = 0; j < input.mbs; ++j) {
      PlannedRoute r;
      r.index = j;
      r.hops.push_back({input.self, 0});
      for (int s : shapes[j % shapes.size()]) r.hops.push_back({view.Replicas(s).front(), s});
      routes.push_back(std::move(r));
    }
    return routes;
  }
};

TEST(RouteShapeTest, TheDataNodeReportsCompletedMicroBatchesByRouteShape) {
  SyntheticDataSource data(1, 8, 32);
  TestSwarmOptions o;
  o.node_stages = {{0}, {1}, {2}, {3}};
  o.num_stages = 4;
  o.driver.mbs_per_iteration = 4;
  o.planner = [] { return std::make_unique<ShapedPlanner>(); };
  TestSwarm swarm(o, [](int, int stage, common::Clock* clock, TaskRunner*) {
    return std::make_unique<TimedStageCompute>(
        clock, TimedStageCompute::Options{.stage = stage, .forward = absl::Milliseconds(10)});
  }, &data);
  ASSERT_TRUE(swarm.Run(3));
  for (const NodeIterationReport& r : swarm.reports(0)) {
    ASSERT_TRUE(r.data.has_value());
    EXPECT_EQ(r.data->completed, 4);
    EXPECT_EQ(r.data->completed_by_route,
              (std::map<std::string, int>{{"in_order", 1}, {"skip", 1}, {"swap", 1},
                                          {"skip_swap", 1}}))
        << "iteration " << r.iteration;
  }
}

}  // namespace
}  // namespace skipswarm::node
