#include "scheduler/planner.h"

#include <set>

#include "gtest/gtest.h"
#include "scheduler/evaluator.h"
#include "scheduler/scenario.h"

namespace skipswarm::scheduler {
namespace {

Scenario Gcp24() {
  auto sc = LoadScenarioFile("scheduler/scenarios/gcp12-24.json");
  EXPECT_TRUE(sc.ok()) << sc.status();
  return *sc;
}

PlanRequest RequestFor(const Scenario& sc) {
  PlanRequest request;
  request.view = &sc.view;
  request.workload = sc.workload;
  request.seed = 7;
  request.max_evaluations = 2000;
  return request;
}

TEST(PlannerTest, EveryPlannerMakesAValidPlan) {
  Scenario sc = Gcp24();
  for (const char* name : {"pipeline", "noskip", "random", "skippipe"}) {
    auto planner = CreatePlanner(name);
    ASSERT_TRUE(planner.ok());
    PlanRequest request = RequestFor(sc);
    auto plan = (*planner)->MakePlan(request);
    ASSERT_TRUE(plan.ok()) << name << ": " << plan.status();
    const Workload rules = RulesFor(**planner, request);
    EXPECT_TRUE(ValidatePlan(sc.view, rules, *plan, rules.path_length).ok())
        << name;
    auto ev = Evaluate(sc.view, *plan);
    ASSERT_TRUE(ev.ok());
    EXPECT_FALSE(ev->deadlocked) << name;
    // 4 data nodes x 6 MBs, whoever injects them.
    EXPECT_EQ(plan->routes.size(), 24u) << name;
  }
}

TEST(PlannerTest, PipelineFormsMinReplicaCountFullPipelines) {
  Scenario sc = Gcp24();
  auto planner = CreatePlanner("pipeline");
  ASSERT_TRUE(planner.ok());
  auto plan = (*planner)->MakePlan(RequestFor(sc));
  ASSERT_TRUE(plan.ok());
  std::set<std::vector<int>> pipelines;
  for (const Route& r : plan->routes) {
    EXPECT_EQ(r.nodes.size(), 7u);  // all 6 stages + return
    pipelines.insert(r.nodes);
  }
  EXPECT_EQ(pipelines.size(), 4u);
}

TEST(PlannerTest, SeededPlannersAreDeterministic) {
  Scenario sc = Gcp24();
  for (const char* name : {"random", "skippipe"}) {
    auto a = (*CreatePlanner(name))->MakePlan(RequestFor(sc));
    auto b = (*CreatePlanner(name))->MakePlan(RequestFor(sc));
    ASSERT_TRUE(a.ok() && b.ok());
    for (size_t i = 0; i < a->routes.size(); ++i) {
      EXPECT_EQ(a->routes[i].nodes, b->routes[i].nodes) << name;
    }
  }
}

TEST(PlannerTest, SkipPipeBeatsBaselinesOnOurScenario) {
  Scenario sc = Gcp24();
  auto time = [&](const std::string& name) {
    auto plan = (*CreatePlanner(name))->MakePlan(RequestFor(sc));
    EXPECT_TRUE(plan.ok()) << plan.status();
    return EvaluateTime(sc.view, *plan, nullptr);
  };
  const double ours = time("skippipe");
  EXPECT_LT(ours, time("pipeline"));
  EXPECT_LT(ours, time("random"));
  EXPECT_LE(ours, time("noskip"));
}

TEST(PlannerTest, UnknownNamesAndMissingReplayRoutesAreErrors) {
  auto bad = CreatePlanner("fastest");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("known: pipeline"), std::string::npos);
  Scenario sc = Gcp24();
  auto replay = CreatePlanner("replay");
  ASSERT_TRUE(replay.ok());
  EXPECT_FALSE((*replay)->MakePlan(RequestFor(sc)).ok());
}

}  // namespace
}  // namespace skipswarm::scheduler
