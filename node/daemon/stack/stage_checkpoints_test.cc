#include "node/daemon/stack/stage_checkpoints.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/sim_clock.h"
#include "gtest/gtest.h"
#include "node/compute/timed_stage_compute.h"

namespace skipswarm::node {
namespace {

// Timed computes keep their "checkpoint" (the step) in memory; the resume
// rule also needs each file to exist, so the test creates them.
class StageCheckpointsTest : public ::testing::Test {
 protected:
  StageCheckpointsTest() {
    options_.name = "n1";
    options_.model.checkpoint_dir =
        (std::filesystem::path(std::getenv("TEST_TMPDIR")) /
         ::testing::UnitTest::GetInstance()->current_test_info()->name())
            .string();
    for (int s : {1, 2}) {
      TimedStageCompute::Options o;
      o.stage = s;
      computes_[s] = std::make_unique<TimedStageCompute>(&clock_, o);
      stages_[s] = computes_[s].get();
    }
  }
  void Step(int stage, int times) {
    for (int i = 0; i < times; ++i) {
      ASSERT_TRUE(computes_[stage]->ApplyUpdate(std::vector<float>(16, 0.f), 1).ok());
    }
  }
  void Touch(int stage) { std::ofstream(StageCheckpointPath(options_, stage)) << "x"; }

  common::SimClock clock_;
  NodeDaemonOptions options_;
  std::map<int, std::unique_ptr<TimedStageCompute>> computes_;
  std::map<int, StageCompute*> stages_;
};

TEST_F(StageCheckpointsTest, PathNamesTheNodeAndStage) {
  EXPECT_EQ(StageCheckpointPath(options_, 2), options_.model.checkpoint_dir + "/n1-stage-2.ckpt");
}

TEST_F(StageCheckpointsTest, ResumesAtTheCommonStep) {
  Step(1, 3);
  Step(2, 3);
  ASSERT_TRUE(SaveStageCheckpoints(options_, stages_).ok());
  EXPECT_TRUE(std::filesystem::is_directory(options_.model.checkpoint_dir));
  Touch(1);
  Touch(2);
  Step(1, 2);
  auto first = ResumeFromStageCheckpoints(options_, stages_);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, 3);
  EXPECT_EQ(computes_[1]->step(), 3);
}

TEST_F(StageCheckpointsTest, StartsAtZeroWithoutCheckpoints) {
  auto none = ResumeFromStageCheckpoints(options_, stages_);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(*none, 0);
  options_.model.checkpoint_dir.clear();
  EXPECT_TRUE(SaveStageCheckpoints(options_, stages_).ok());
  auto off = ResumeFromStageCheckpoints(options_, stages_);
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ(*off, 0);
}

TEST_F(StageCheckpointsTest, RefusesStepsThatDisagree) {
  Step(1, 1);
  Step(2, 2);
  ASSERT_TRUE(SaveStageCheckpoints(options_, stages_).ok());
  Touch(1);
  Touch(2);
  auto first = ResumeFromStageCheckpoints(options_, stages_);
  EXPECT_EQ(first.status().code(), absl::StatusCode::kFailedPrecondition) << first.status();
  EXPECT_NE(first.status().message().find("disagree on the step"), std::string::npos);
}

TEST_F(StageCheckpointsTest, RefusesAStageWithoutACheckpoint) {
  Step(1, 1);
  Step(2, 1);
  ASSERT_TRUE(SaveStageCheckpoints(options_, stages_).ok());
  Touch(1);
  auto first = ResumeFromStageCheckpoints(options_, stages_);
  EXPECT_EQ(first.status().code(), absl::StatusCode::kFailedPrecondition) << first.status();
}

}  // namespace
}  // namespace skipswarm::node
