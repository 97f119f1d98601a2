#include "scheduler/evaluator.h"

#include "gtest/gtest.h"
#include "scheduler/route_search.h"
#include "scheduler/test_views.h"

namespace skipswarm::scheduler {
namespace {

using testing::MakeRoute;
using testing::UniformView;

// Every case uses c = 1 s per forward and 0.5 s per hop, so all times are
// exact binary fractions and compare with ==.

TEST(EvaluatorTest, OneRouteTakesItsContentionFreeLatency) {
  TopologyView view = UniformView({1, 1}, 1.0, 0.5, 1);
  Plan plan{"test", {MakeRoute(0, {0, 1, 0})}};
  auto ev = Evaluate(view, plan);
  ASSERT_TRUE(ev.ok()) << ev.status();
  // F(o) 0..1, F(a) 1.5..2.5, Loss(o) 3..3.25, B(a) 3.75..5.25,
  // B(o) 5.75..7.25.
  EXPECT_EQ(ev->iteration_time_s, 7.25);
  EXPECT_EQ(RouteLatency(view, {0, 1, 0}), 7.25);
  EXPECT_EQ(ev->node_busy_s[0], 2.75);
  EXPECT_EQ(ev->node_busy_s[1], 2.5);
  EXPECT_EQ(ev->stage_visits, (std::vector<int>{1, 1}));
  EXPECT_FALSE(ev->deadlocked);
}

TEST(EvaluatorTest, TwoMicroBatchesCollideOnASharedNode) {
  TopologyView view = UniformView({2, 1}, 1.0, 0.5, 2);  // d0 d1 | a=2
  Plan plan{"test", {MakeRoute(0, {0, 2, 0}), MakeRoute(1, {1, 2, 1})}};
  auto ev = Evaluate(view, plan);
  ASSERT_TRUE(ev.ok());
  // Both reach a at 1.5; mb 0 wins the tie: F0 1.5..2.5, F1 2.5..3.5.
  // B0 arrives 3.75 and runs 3.75..5.25; B1 arrives 4.75, waits: 5.25..6.75.
  EXPECT_EQ(ev->route_finish_s[0], 7.25);
  EXPECT_EQ(ev->route_finish_s[1], 8.75);
  EXPECT_EQ(ev->iteration_time_s, 8.75);
}

TEST(EvaluatorTest, MemorySlotGatesTheNextForward) {
  TopologyView view = UniformView({1, 1}, 1.0, 0.5, 1);
  Plan plan{"test", {MakeRoute(0, {0, 1, 0}), MakeRoute(1, {0, 1, 0})}};
  auto ev = Evaluate(view, plan);
  ASSERT_TRUE(ev.ok());
  // One slot at the origin: mb 1 starts when mb 0's B(o) frees it at 7.25.
  EXPECT_EQ(ev->route_finish_s[0], 7.25);
  EXPECT_EQ(ev->iteration_time_s, 14.5);

  Workload w;
  w.mb_per_data_node = 2;
  w.path_length = 2;
  auto lb = ComputeLowerBound(view, w);
  ASSERT_TRUE(lb.ok()) << lb.status();
  EXPECT_EQ(lb->origin_work_s, 5.5);
  EXPECT_EQ(lb->origin_memory_s, 14.5);
  EXPECT_EQ(lb->spread_work_s, 5.0);
  EXPECT_EQ(lb->origin_tail_s, 14.5);  // 2 x 7.25 - 1.5 + 1 x 1.5 + 0
  EXPECT_EQ(lb->seconds, 14.5);
}

TEST(EvaluatorTest, BackwardBeatsForwardUnlessPriorityDecides) {
  TopologyView view = UniformView({2, 1}, 1.0, 0.5, 2);
  Route late = MakeRoute(1, {1, 2, 1});
  late.release_s = 2.25;  // F1 reaches a at 3.75, together with B0
  Plan plan{"test", {MakeRoute(0, {0, 2, 0}), late}};
  auto ev = Evaluate(view, plan);
  ASSERT_TRUE(ev.ok());
  // B0 3.75..5.25 first, then F1 5.25..6.25; mb 1 ends 11.
  EXPECT_EQ(ev->route_finish_s[0], 7.25);
  EXPECT_EQ(ev->route_finish_s[1], 11.0);

  plan.routes[1].priority = -1;  // served first everywhere
  ev = Evaluate(view, plan);
  ASSERT_TRUE(ev.ok());
  // F1 3.75..4.75, B0 4.75..6.25 -> mb 0 ends 8.25; B1 6.25..7.75 -> 9.75.
  EXPECT_EQ(ev->route_finish_s[0], 8.25);
  EXPECT_EQ(ev->route_finish_s[1], 9.75);
  EXPECT_EQ(ev->iteration_time_s, 9.75);
}

TEST(EvaluatorTest, CrossedSwapsOnSingleSlotsDeadlock) {
  TopologyView view = UniformView({2, 1, 1}, 1.0, 0.5, 1);  // d0 d1 | A=2 | B=3
  Plan plan{"test", {MakeRoute(0, {0, 2, 3, 0}), MakeRoute(1, {1, 3, 2, 1})}};
  auto ev = Evaluate(view, plan);
  ASSERT_TRUE(ev.ok());
  EXPECT_TRUE(ev->deadlocked);
  EXPECT_TRUE(std::isinf(ev->iteration_time_s));
  EXPECT_TRUE(std::isinf(EvaluateTime(view, plan, nullptr)));
}

TEST(EvaluatorTest, RejectsBrokenRoutes) {
  TopologyView view = UniformView({1, 1}, 1.0, 0.5, 1);
  Plan plan{"test", {MakeRoute(0, {0, 1})}};
  EXPECT_FALSE(Evaluate(view, plan).ok());
  plan.routes[0].nodes = {0, 7, 0};
  EXPECT_FALSE(Evaluate(view, plan).ok());
}

}  // namespace
}  // namespace skipswarm::scheduler

namespace skipswarm::scheduler {
namespace {

TEST(EvaluatorTest, OriginTailBoundIsReachedByASpacedSchedule) {
  // One origin, 2 slots, 4 MBs, one private relay per MB pair: the tail
  // bound 2L - 1.5c + 2 x 1.5c + 1 x c = 2 x 7.25 + 2.5 = 17 s.
  TopologyView view = testing::UniformView({1, 2}, 1.0, 0.5, 2);
  Workload w;
  w.mb_per_data_node = 4;
  w.path_length = 2;
  auto lb = ComputeLowerBound(view, w);
  ASSERT_TRUE(lb.ok());
  EXPECT_EQ(lb->origin_tail_s, 17.0);
  EXPECT_EQ(lb->seconds, 17.0);
  // MBs 0, 2 on relay 1 and 1, 3 on relay 2; release 1 at 2.5 s.
  Plan plan{"test",
            {testing::MakeRoute(0, {0, 1, 0}), testing::MakeRoute(1, {0, 2, 0}),
             testing::MakeRoute(2, {0, 1, 0}), testing::MakeRoute(3, {0, 2, 0})}};
  auto ev = Evaluate(view, plan);
  ASSERT_TRUE(ev.ok());
  EXPECT_GE(ev->iteration_time_s, lb->seconds);
}

}  // namespace
}  // namespace skipswarm::scheduler

namespace skipswarm::scheduler {
namespace {

TEST(EvaluatorTest, LinkContentionSerialisesHopsOnOneLink) {
  // Two MBs from d0 over relay a (2 slots everywhere). Without contention,
  // F1 waits only for d0: F0 0..1, F1 1..2; hops 1..1.5 and 2..2.5 do not
  // overlap anyway, so make the hop long (3 s) to force an overlap.
  TopologyView view = testing::UniformView({1, 1}, 1.0, 3.0, 2);
  Plan plan{"test",
            {testing::MakeRoute(0, {0, 1, 0}), testing::MakeRoute(1, {0, 1, 0})}};
  auto free_links = Evaluate(view, plan);
  auto contended = Evaluate(view, plan, /*link_contention=*/true);
  ASSERT_TRUE(free_links.ok() && contended.ok());
  // Free: mb 1 reaches a at 2 + 3 = 5. Contended: the d0->a link is busy
  // with mb 0 until 4, so mb 1 arrives at 7.
  EXPECT_GT(contended->route_finish_s[1], free_links->route_finish_s[1]);
  EXPECT_EQ(contended->route_finish_s[0], free_links->route_finish_s[0]);
}

}  // namespace
}  // namespace skipswarm::scheduler
