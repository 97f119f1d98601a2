#include "sim/driver.h"

#include "gtest/gtest.h"
#include "sim/report.h"

namespace skipswarm::sim {
namespace {

SimScenario Load(const std::string& name, uint64_t seed) {
  auto sc = LoadSimScenario("sim/scenarios/" + name, seed);
  EXPECT_TRUE(sc.ok()) << sc.status();
  return *sc;
}

TEST(RunSimulationTest, SameSeedGivesByteIdenticalReports) {
  SimScenario sc = Load("small-churn.json", 7);
  auto a = RunSimulation(sc, {});
  auto b = RunSimulation(Load("small-churn.json", 7), {});
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(ReportJson(*a), ReportJson(*b));
  EXPECT_EQ(ReportSvg(*a), ReportSvg(*b));
}

TEST(RunSimulationTest, SmallChurnScenarioKillsJoinsAndKeepsTraining) {
  auto report = RunSimulation(Load("small-churn.json", 7), {});
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->iterations.size(), 6u);
  EXPECT_TRUE(report->stopped_early.empty()) << report->stopped_early;
  ASSERT_EQ(report->failures.size(), 1u);
  const FailureRecord& f = report->failures[0];
  EXPECT_EQ(f.node, "nl-s1-0");
  EXPECT_GT(f.gossip_detect_s, 0);
  EXPECT_GT(f.mbs_rerouted + f.mbs_dropped, 0);
  for (double d : f.reroute_s) EXPECT_LE(d, 1.0);
  const ReportSummary s = Summarise(*report);
  EXPECT_EQ(s.completed + s.dropped, s.mbs);
  EXPECT_GT(s.completed, 0);
  bool joined = false;
  for (const ChurnRecord& c : report->churn) joined |= c.kind == "join";
  EXPECT_TRUE(joined);
  // After the join and gossip, the newcomer is in the view.
  EXPECT_EQ(report->iterations.back().members, 8);
}

TEST(RunSimulationTest, WaitForReplacementDropsInsteadOfRerouting) {
  SimOptions opts;
  opts.planner = "pipeline";
  opts.wait_for_replacement = true;
  opts.replacement_s = 30;
  auto report = RunSimulation(Load("small-churn.json", 7), opts);
  ASSERT_TRUE(report.ok()) << report.status();
  const ReportSummary s = Summarise(*report);
  EXPECT_EQ(s.rerouted, 0);
}

TEST(RunSimulationTest, ReplaysSkipPipesRoutesAndPlansIterations) {
  SimScenario sc = Load("gcp20-skippipe.json", 1);
  SimOptions opts;
  opts.iterations = 2;
  opts.planner = "replay";
  auto replay = RunSimulation(sc, opts);
  ASSERT_TRUE(replay.ok()) << replay.status();
  EXPECT_NEAR(replay->iterations[0].time_s, replay->iterations[0].planned_s,
              1e-6);
  EXPECT_FALSE(replay->iterations[1].replanned);
}

}  // namespace
}  // namespace skipswarm::sim
