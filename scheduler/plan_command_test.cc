#include "scheduler/plan_command.h"

#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "gtest/gtest.h"

ABSL_DECLARE_FLAG(std::string, scenario);
ABSL_DECLARE_FLAG(std::string, planner);
ABSL_DECLARE_FLAG(std::string, format);
ABSL_DECLARE_FLAG(int, budget_ms);
ABSL_DECLARE_FLAG(bool, hybrid);
ABSL_DECLARE_FLAG(std::string, hybrid_mode);
ABSL_DECLARE_FLAG(std::vector<std::string>, hybrid_one_stage_nodes);

namespace skipswarm::scheduler {
namespace {

TEST(PlanCommandTest, DescribesItself) {
  common::cli::Command command = PlanCommand();
  EXPECT_EQ(command.name, "plan");
  EXPECT_EQ(command.flag_files,
            (std::vector<std::string>{"scheduler/plan_command.cc", "scheduler/hybrid_flags.cc"}));
  EXPECT_TRUE(static_cast<bool>(command.run));
}

TEST(PlanCommandTest, PlansTheReferenceFileAndRejectsBadScenarios) {
  common::cli::Command command = PlanCommand();
  absl::SetFlag(&FLAGS_scenario,
                "scheduler/testdata/skippipe_gcp20_schedule.json");
  absl::SetFlag(&FLAGS_planner, "pipeline");
  absl::SetFlag(&FLAGS_format, "json");
  EXPECT_EQ(command.run({}), 0);
  EXPECT_EQ(command.run({"extra"}), 2);

  const std::string bad = ::testing::TempDir() + "/bad.json";
  std::ofstream(bad) << R"({"model": {"num_stages": 2}, "nodes": []})";
  absl::SetFlag(&FLAGS_scenario, bad);
  EXPECT_EQ(command.run({}), 1);
  absl::SetFlag(&FLAGS_planner, "nonsense");
  absl::SetFlag(&FLAGS_scenario,
                "scheduler/testdata/skippipe_gcp20_schedule.json");
  EXPECT_EQ(command.run({}), 1);
}

TEST(PlanCommandTest, HybridComparesThePlansAndRefusesAnUnknownPlanner) {
  common::cli::Command command = PlanCommand();
  absl::SetFlag(&FLAGS_scenario, "scheduler/testdata/skippipe_gcp20_schedule.json");
  absl::SetFlag(&FLAGS_hybrid, true);
  absl::SetFlag(&FLAGS_planner, "nonsense");
  EXPECT_EQ(command.run({}), 2);
  absl::SetFlag(&FLAGS_planner, "skippipe");
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(command.run({}), 0);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("pipeline-only"), std::string::npos) << out;
  EXPECT_NE(out.find("mixed backward"), std::string::npos) << out;
  absl::SetFlag(&FLAGS_hybrid, false);
}

TEST(PlanCommandTest, HybridModeKeepsOneModeAndOneStageNodesMustExist) {
  common::cli::Command command = PlanCommand();
  absl::SetFlag(&FLAGS_scenario, "scheduler/testdata/skippipe_gcp20_schedule.json");
  absl::SetFlag(&FLAGS_planner, "skippipe");
  absl::SetFlag(&FLAGS_hybrid, true);
  absl::SetFlag(&FLAGS_hybrid_mode, "pipeline");
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(command.run({}), 0);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("pipeline-only"), std::string::npos) << out;
  EXPECT_EQ(out.find("sdp-only"), std::string::npos) << out;
  EXPECT_EQ(out.find("mixed"), std::string::npos) << out;
  absl::SetFlag(&FLAGS_hybrid_mode, "everything");
  EXPECT_EQ(command.run({}), 2);
  absl::SetFlag(&FLAGS_hybrid_mode, "all");
  absl::SetFlag(&FLAGS_hybrid_one_stage_nodes, std::vector<std::string>{"n1", "n99"});
  EXPECT_EQ(command.run({}), 1);
  absl::SetFlag(&FLAGS_hybrid_one_stage_nodes, std::vector<std::string>{});
  absl::SetFlag(&FLAGS_hybrid, false);
}

}  // namespace
}  // namespace skipswarm::scheduler
