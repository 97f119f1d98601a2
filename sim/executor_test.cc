#include "sim/executor.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"
#include "scheduler/evaluator.h"
#include "scheduler/planner.h"
#include "scheduler/scenario.h"

namespace skipswarm::sim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A world where deaths are scheduled up front.
class FakeWorld : public WorldHooks {
 public:
  explicit FakeWorld(int n) : death_(n, kInf), gossip_(n, kInf) {}
  double DeathTime(int v) override { return death_[v]; }
  double GossipDeadTime(int v) override { return gossip_[v]; }
  bool LinkUp(int, int) override { return true; }
  double SpeedFactor(int) override { return 1; }
  std::vector<double> death_;
  std::vector<double> gossip_;
};

scheduler::Scenario Gcp20() {
  auto sc = scheduler::LoadScenarioFile(
      "sim/scenarios/skippipe-gcp20-schedule.json");
  EXPECT_TRUE(sc.ok()) << sc.status();
  return *sc;
}

scheduler::Plan PlanWith(const scheduler::Scenario& sc,
                         const std::string& name) {
  auto planner = scheduler::CreatePlanner(name);
  EXPECT_TRUE(planner.ok());
  scheduler::PlanRequest req;
  req.view = &sc.view;
  req.workload = sc.workload;
  req.seed = 1;
  auto plan = (*planner)->MakePlan(req);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *plan;
}

TEST(IterationExecutorTest, MatchesTheEvaluatorWithoutFailures) {
  scheduler::Scenario sc = Gcp20();
  for (const std::string name : {"pipeline", "random", "skippipe"}) {
    scheduler::Plan plan = PlanWith(sc, name);
    auto ev = scheduler::Evaluate(sc.view, plan);
    ASSERT_TRUE(ev.ok());
    common::SimClock clock;
    FakeWorld world(sc.view.num_nodes());
    IterationExecutor exec(sc.view, sc.workload, &clock, &world, {});
    IterationResult r = exec.Run(plan);
    EXPECT_DOUBLE_EQ(r.end_s, ev->iteration_time_s) << name;
    EXPECT_EQ(r.completed, r.mbs);
    EXPECT_EQ(r.dropped, 0);
    for (int v = 0; v < sc.view.num_nodes(); ++v) {
      EXPECT_NEAR(r.node_busy_s[v], ev->node_busy_s[v], 1e-9);
    }
  }
  auto replay = sc.RouteSet("ca-paths");
  ASSERT_TRUE(replay.ok());
  auto ev = scheduler::Evaluate(sc.view, *replay);
  common::SimClock clock;
  FakeWorld world(sc.view.num_nodes());
  IterationExecutor exec(sc.view, sc.workload, &clock, &world, {});
  EXPECT_DOUBLE_EQ(exec.Run(*replay).end_s, ev->iteration_time_s);
  EXPECT_NEAR(absl::ToDoubleSeconds(clock.SteadyNow()), ev->iteration_time_s,
              1e-6);
}

TEST(IterationExecutorTest, ReroutesAroundANodeThatDiesMidIteration) {
  scheduler::Scenario sc = Gcp20();
  scheduler::Plan plan = PlanWith(sc, "skippipe");
  // Kill the busiest non-data node early.
  auto ev = scheduler::Evaluate(sc.view, plan);
  int victim = -1;
  for (int v = 0; v < sc.view.num_nodes(); ++v) {
    if (sc.view.stage(v) == 0) continue;
    if (victim < 0 || ev->node_busy_s[v] > ev->node_busy_s[victim]) victim = v;
  }
  common::SimClock clock;
  FakeWorld world(sc.view.num_nodes());
  world.death_[victim] = 1.0;
  world.gossip_[victim] = 3.5;
  IterationExecutor exec(sc.view, sc.workload, &clock, &world,
                         {.stream_timeout_s = 0.5});
  clock.RunAt(absl::Seconds(1), [&] { exec.OnNodeDeath(victim); });
  IterationResult r = exec.Run(plan);
  EXPECT_EQ(r.completed + r.dropped, r.mbs);
  EXPECT_GT(r.rerouted, 0);
  for (const RerouteRecord& e : r.events) {
    EXPECT_EQ(e.failed_node, victim);
    EXPECT_GE(e.detected_s, e.failed_at_s);
    EXPECT_LE(e.detected_s - e.failed_at_s, 0.5 + 1e-9);
    if (!e.dropped) {
      EXPECT_NEAR(e.sent_s - e.detected_s, 0.001, 1e-9);
      EXPECT_GT(e.resumed_s, e.sent_s);
    }
  }
  // Nothing completed went through the dead node after it died.
  EXPECT_LT(r.node_busy_s[victim], ev->node_busy_s[victim]);
}

TEST(IterationExecutorTest, WithoutReroutingFailedHopsAreDropped) {
  scheduler::Scenario sc = Gcp20();
  scheduler::Plan plan = PlanWith(sc, "pipeline");
  const int victim = sc.view.stage_nodes(3)[0];
  common::SimClock clock;
  FakeWorld world(sc.view.num_nodes());
  world.death_[victim] = 0;
  IterationExecutor exec(sc.view, sc.workload, &clock, &world,
                         {.stream_timeout_s = 0.5, .reroute = false});
  IterationResult r = exec.Run(plan);
  EXPECT_GT(r.dropped, 0);
  EXPECT_EQ(r.rerouted, 0);
  EXPECT_EQ(r.completed + r.dropped, r.mbs);
}

}  // namespace
}  // namespace skipswarm::sim
