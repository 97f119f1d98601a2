#include "sim/node_swarm.h"

#include <cmath>

#include "gtest/gtest.h"
#include "sim/driver.h"

namespace skipswarm::sim {
namespace {

SimScenario Small() {
  auto sc = LoadSimScenario("sim/scenarios/small-static.json", 1);
  EXPECT_TRUE(sc.ok()) << sc.status();
  return *sc;
}

SimScenario WithM(int m) {
  auto sc = ParseSimScenario(
      R"({"topology_file": "small-static.json", "workload": {"mb_per_data_node": )" +
          std::to_string(m) + "}}",
      "sim/scenarios", 1);
  EXPECT_TRUE(sc.ok()) << sc.status();
  return *sc;
}

struct Pair {
  double real_s;
  double sim_s;
};

Pair FirstIteration(const SimScenario& sc, const std::string& planner) {
  NodeSwarmOptions o;
  o.planner = planner;
  o.iterations = 2;
  auto real = RunNodeSwarm(sc, o);
  EXPECT_TRUE(real.ok()) << real.status();
  SimOptions so;
  so.planner = planner;
  so.iterations = 2;
  auto model = RunSimulation(sc, so);
  EXPECT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(real->dropped, 0);
  EXPECT_EQ(real->completed, 2 * model->iterations[0].mbs);
  return {real->iteration_s[0], model->iterations[0].time_s};
}

// Fidelity: while memory slots do not bind (M <= slots), the real node code
// and the evaluator-based driver give the same iteration time for the same
// plan, to the microsecond.
TEST(NodeSwarmTest, RealNodesEqualTheSimulatorWhenSlotsDoNotBind) {
  for (const std::string planner : {"pipeline", "skippipe"}) {
    for (int m : {1, 3}) {
      const Pair p = FirstIteration(WithM(m), planner);
      EXPECT_NEAR(p.real_s, p.sim_s, 1e-6) << planner << " M=" << m;
    }
  }
}

// With M > slots they differ (measured: pipeline 5.01 s real vs 5.67 s
// simulated, skippipe 5.17 vs 5.01 on this scenario with M = 4, 3 slots):
// the stage server and the evaluator release and re-grant memory slots in a
// different order. Within 15%; see sim/README.md, "Fidelity".
TEST(NodeSwarmTest, RealNodesStayWithin15PercentWhenSlotsBind) {
  for (const std::string planner : {"pipeline", "skippipe"}) {
    const Pair p = FirstIteration(Small(), planner);
    EXPECT_NEAR(p.real_s, p.sim_s, 0.15 * p.sim_s) << planner;
  }
}

TEST(NodeSwarmTest, RealNodesRouteAroundAKill) {
  SimScenario sc = Small();
  NodeSwarmOptions o;
  o.iterations = 3;
  o.kills = {{"canada-s1-0", 1.0}};
  auto real = RunNodeSwarm(sc, o);
  ASSERT_TRUE(real.ok()) << real.status();
  EXPECT_EQ(real->iteration_s.size(), 3u);
  EXPECT_GT(real->completed, 0);
}

}  // namespace
}  // namespace skipswarm::sim
