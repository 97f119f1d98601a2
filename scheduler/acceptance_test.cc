// Issue 4's acceptance criteria on SkipPipe's published 20-node, 12-region
// schedule (scheduler/testdata). The search runs without a clock, so it
// stops on its evaluation limits and the result is deterministic.
#include "gtest/gtest.h"
#include "scheduler/compare.h"
#include "scheduler/scenario.h"

namespace skipswarm::scheduler {
namespace {

class AcceptanceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto sc = LoadScenarioFile("scheduler/testdata/skippipe_gcp20_schedule.json");
    ASSERT_TRUE(sc.ok()) << sc.status();
    scenario_ = new Scenario(*std::move(sc));
    ComparisonOptions options;
    options.planners = PlannerNames();
    options.replay_key = "ca-paths";
    options.seed = 1;
    auto table = ComparePlanners(*scenario_, options);
    ASSERT_TRUE(table.ok()) << table.status();
    table_ = new Comparison(*std::move(table));
    std::cout << FormatTable(*scenario_, *table_);
  }
  static void TearDownTestSuite() {
    delete table_;
    delete scenario_;
  }
  static double Time(const std::string& planner) {
    for (const PlannerResult& r : table_->results) {
      if (r.planner == planner) return r.evaluation.iteration_time_s;
    }
    ADD_FAILURE() << "no result for " << planner;
    return 0;
  }
  static Scenario* scenario_;
  static Comparison* table_;
};
Scenario* AcceptanceTest::scenario_ = nullptr;
Comparison* AcceptanceTest::table_ = nullptr;

TEST_F(AcceptanceTest, EveryPlanIsValidBalancedAndRuns) {
  ASSERT_EQ(table_->results.size(), 5u);
  for (const PlannerResult& r : table_->results) {
    EXPECT_TRUE(r.status.ok()) << r.planner << ": " << r.status;
    EXPECT_TRUE(r.validity.ok()) << r.planner << ": " << r.validity;
    EXPECT_FALSE(r.evaluation.deadlocked) << r.planner;
  }
}

TEST_F(AcceptanceTest, SkipPipeBeatsEveryBaselineAndMeetsTheBound) {
  const double lb = table_->lower_bound.seconds;
  const double ours = Time("skippipe");
  EXPECT_NEAR(lb, 32.4838, 1e-3);  // Australia: 2 x 15.142 + 5 x 0.44
  EXPECT_LE(ours, Time("replay:ca-paths") + 1e-9);
  EXPECT_LE(ours, 1.10 * lb);
  EXPECT_LE(ours, 0.5 * Time("pipeline"));
  EXPECT_LT(ours, Time("noskip"));
  EXPECT_LT(ours, Time("random"));
}

TEST_F(AcceptanceTest, SkipPipeIsDeterministicForViewAndSeed) {
  auto again = ComparePlanners(*scenario_, {{"skippipe"}, "ca-paths", 1});
  ASSERT_TRUE(again.ok());
  const Plan* first = nullptr;
  for (const PlannerResult& r : table_->results) {
    if (r.planner == "skippipe") first = &r.plan;
  }
  ASSERT_NE(first, nullptr);
  const Plan& second = again->results[0].plan;
  ASSERT_EQ(first->routes.size(), second.routes.size());
  for (size_t i = 0; i < second.routes.size(); ++i) {
    EXPECT_EQ(first->routes[i].nodes, second.routes[i].nodes);
    EXPECT_EQ(first->routes[i].priority, second.routes[i].priority);
  }
}

}  // namespace
}  // namespace skipswarm::scheduler
