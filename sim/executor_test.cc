#include "sim/executor.h"

#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

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

// One data node, two replicas a and b of stage 1 (10 s forwards), one
// node of stage 2; hops take 1 s. Both MBs are planned through a.
struct TwoReplicas {
  scheduler::TopologyView view;
  scheduler::Workload workload;
  scheduler::Plan plan;
};

TwoReplicas MakeTwoReplicas() {
  TwoReplicas t;
  scheduler::ModelShape shape{.num_stages = 3, .layers_per_stage = 1, .samples_per_mb = 1};
  std::vector<scheduler::NodeSpec> specs;
  for (const auto& [name, stage, secs] : std::vector<std::tuple<std::string, int, double>>{
           {"origin", 0, 0.001}, {"a", 1, 10}, {"b", 1, 10}, {"c", 2, 0.001}}) {
    scheduler::NodeSpec n;
    n.name = name;
    n.id = common::NodeId::ForName(name);
    n.stage = stage;
    n.sec_per_layer_sample = secs;
    n.memory_slots = 4;
    specs.push_back(n);
  }
  std::vector<double> hops(16, 1.0);
  for (int v = 0; v < 4; ++v) hops[v * 4 + v] = 0;
  auto view = scheduler::TopologyView::Create(shape, specs, hops);
  EXPECT_TRUE(view.ok()) << view.status();
  t.view = *view;
  t.workload.mb_per_data_node = 2;
  t.workload.path_length = 3;
  t.workload.max_swaps = 0;
  for (int mb : {0, 1}) t.plan.routes.push_back({mb, 0, {0, 1, 3, 0}, mb, 0});
  return t;
}

// Note [Lost with a neighbour] in node/stage/stage_server.cc, on the
// executor: an MB on its way to a node that dies is re-routed by the
// holder; one the node had admitted (arrived, queued or running) is lost.
TEST(IterationExecutorTest, AnMbOnItsWayIsReRoutedOneTheDeadNodeAdmittedIsDropped) {
  const TwoReplicas t = MakeTwoReplicas();
  for (const double death : {0.5, 5.0}) {
    common::SimClock clock;
    FakeWorld world(4);
    world.death_[1] = death;
    IterationExecutor exec(t.view, t.workload, &clock, &world, {.stream_timeout_s = 0.5});
    clock.RunAt(absl::Seconds(death), [&] { exec.OnNodeDeath(1); });
    IterationResult r = exec.Run(t.plan);
    ASSERT_EQ(r.mbs, 2);
    if (death < 1) {  // both still on the wire to a: re-routed through b
      EXPECT_EQ(r.rerouted, 2);
      EXPECT_EQ(r.completed, 2);
      EXPECT_GT(r.node_busy_s[2], 0);
    } else {  // a had admitted both (one running, one queued)
      EXPECT_EQ(r.rerouted, 0);
      EXPECT_EQ(r.dropped, 2);
      EXPECT_EQ(r.node_busy_s[2], 0);
    }
  }
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
