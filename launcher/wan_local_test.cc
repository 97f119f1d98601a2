#include "launcher/wan_local.h"

#include <cstdio>
#include <fstream>

#include "gtest/gtest.h"
#include "node/transport/wan_table.h"

namespace skipswarm::launcher {
namespace {

using sim::SimScenario;

SimScenario Load(const std::string& name) {
  absl::StatusOr<SimScenario> sc = sim::LoadSimScenario("sim/scenarios/" + name, 1);
  EXPECT_TRUE(sc.ok()) << sc.status();
  return *sc;
}

TEST(WanSetupTest, SmallWanUsesTheRegionTableScaledToThePayload) {
  SimScenario sc = Load("small-wan.json");
  WanSetupOptions o;
  o.payload_bytes = 1 << 20;
  absl::StatusOr<WanSetup> w = MakeWanSetup(sc, o);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_FALSE(w->per_node_links);
  EXPECT_EQ(w->payload_bytes, 1 << 20);
  EXPECT_EQ(w->nodes.size(), 6u);
  EXPECT_EQ(w->table.nodes.at("lo-a-s0-0").region, "lo-a");
  const node::LinkShape* ab = w->table.FindLink("lo-b", "lo-a");
  ASSERT_NE(ab, nullptr);
  EXPECT_EQ(ab->latency, absl::Milliseconds(10));
  // 0.1 GiB/s for 4 MiB frames = 0.025 GiB/s for 1 MiB frames: same time.
  EXPECT_DOUBLE_EQ(ab->bytes_per_second, 0.1 * (1 << 30) / 4);
  // Every route the planner made is in the routes text, origin first.
  EXPECT_EQ(w->plan.routes.size(), 6u);
  EXPECT_NE(w->routes.find("lo-a-s0-0 -1 priority="), std::string::npos) << w->routes;
  EXPECT_NE(w->nodes[0].extra_config.find("\"node_timed_forward_s\": 0.1"), std::string::npos)
      << w->nodes[0].extra_config;
}

// The simulator runs exactly the plan the daemons replay; with no failures
// the executor equals the evaluator (sim/README.md).
TEST(WanSetupTest, SimulatedIterationMatchesTheEvaluatorForThePlan) {
  SimScenario sc = Load("small-wan.json");
  WanSetup w = MakeWanSetup(sc, {}).value();
  absl::StatusOr<double> s = SimulatedIterationSeconds(sc, w.plan);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_NEAR(*s, w.planned_s, 1e-9);
  EXPECT_GE(w.planned_contention_s, w.planned_s - 1e-9);
}

TEST(WanSetupTest, SkipPipeDelaysBecomePerNodePairLinks) {
  SimScenario sc = Load("gcp20-skippipe.json");
  WanSetupOptions o;
  o.planner = "replay";
  WanSetup w = MakeWanSetup(sc, o).value();
  EXPECT_TRUE(w.per_node_links);
  const auto& u = sc.universe.view;
  const node::LinkShape* l = w.table.FindLink(u.node(0).name, u.node(5).name);
  ASSERT_NE(l, nullptr);
  // A payload-sized frame takes the pair's per-MB transfer time.
  EXPECT_NEAR(w.payload_bytes / l->bytes_per_second, u.hop_s(0, 5), 1e-9);
}

TEST(ScheduledKillsTest, KillsFallInTheirIterationAndOtherChurnIsCounted) {
  auto sc = sim::ParseSimScenario(R"({"topology_file": "small-static.json", "churn": [
      {"type": "kill", "node": "canada-s1-0", "at_s": 2.0},
      {"type": "kill", "node": "london-s2-0", "at_s": 11.0},
      {"type": "straggler", "node": "canada-s2-0", "factor": 3, "at_s": 4, "duration_s": 6}]})",
                             "sim/scenarios", 1);
  ASSERT_TRUE(sc.ok()) << sc.status();
  int skipped = 0;
  const std::map<std::string, int64_t> kills = ScheduledKills(*sc, 5.0, &skipped);
  EXPECT_EQ(kills, (std::map<std::string, int64_t>{{"canada-s1-0", 0}, {"london-s2-0", 2}}));
  EXPECT_EQ(skipped, 2);  // the straggler's start and end
}

TEST(ReadIterationTimesTest, TakesTheSlowestDataNodePerIteration) {
  const std::string path = ::testing::TempDir() + "/progress.jsonl";
  std::ofstream(path) << "{\"node\":\"a\",\"iteration\":0,\"iteration_s\":1.5}\n"
                         "{\"node\":\"b\",\"iteration\":0,\"iteration_s\":2.0}\n"
                         "not json\n"
                         "{\"node\":\"a\",\"iteration\":1,\"iteration_s\":1.25}\n";
  absl::StatusOr<std::map<int, double>> t = ReadIterationTimes(path);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t, (std::map<int, double>{{0, 2.0}, {1, 1.25}}));
  EXPECT_FALSE(ReadIterationTimes(path + ".missing").ok());
}

}  // namespace
}  // namespace skipswarm::launcher
