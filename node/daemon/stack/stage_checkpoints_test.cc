#include "node/daemon/stack/stage_checkpoints.h"

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/sim_clock.h"
#include "gtest/gtest.h"
#include "node/compute/timed_stage_compute.h"
#include "node/daemon/stack/stage_set_commit.h"
#include "common/atomic_file.h"

namespace skipswarm::node {
namespace {

// Timed computes write real (tiny) checkpoint files: the stage and step.
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

// Files that disagree with no interrupted save to finish (copied in by
// hand, say) are still refused.
TEST_F(StageCheckpointsTest, RefusesStepsThatDisagree) {
  Step(1, 1);
  Step(2, 2);
  ASSERT_TRUE(SaveStageCheckpoints(options_, stages_).ok());
  auto first = ResumeFromStageCheckpoints(options_, stages_);
  EXPECT_EQ(first.status().code(), absl::StatusCode::kFailedPrecondition) << first.status();
  EXPECT_NE(first.status().message().find("disagree on the step"), std::string::npos);
}

TEST_F(StageCheckpointsTest, RefusesAStageWithoutACheckpoint) {
  Step(1, 1);
  Step(2, 1);
  ASSERT_TRUE(SaveStageCheckpoints(options_, stages_).ok());
  std::filesystem::remove(StageCheckpointPath(options_, 2));
  auto first = ResumeFromStageCheckpoints(options_, stages_);
  EXPECT_EQ(first.status().code(), absl::StatusCode::kFailedPrecondition) << first.status();
}

// A node hosting stages 1 and 2 killed while saving step 5 over step 3, at
// every point of the save (Note [Stage set commit]): the next start resumes
// at one step, 3 or 5, never refuses. Before the commit, a kill between
// the two stage files left stage 1 at 5 and stage 2 at 3: refused at every
// restart.
TEST_F(StageCheckpointsTest, ASaveKilledAtAnyPointResumesAtOneStep) {
  const std::string& dir = options_.model.checkpoint_dir;
  for (int point = 0; point <= 4; ++point) {
    SCOPED_TRACE(point);
    std::filesystem::remove_all(dir);
    for (int s : {1, 2}) {
      TimedStageCompute::Options o;
      o.stage = s;
      computes_[s] = std::make_unique<TimedStageCompute>(&clock_, o);
      stages_[s] = computes_[s].get();
    }
    Step(1, 3);
    Step(2, 3);
    ASSERT_TRUE(SaveStageCheckpoints(options_, stages_).ok());
    Step(1, 2);
    Step(2, 2);
    // The save of step 5, cut after `point` of its writes: the two pending
    // files, the marker, the first rename.
    for (int s : {1, 2}) {
      if (point >= s) {
        ASSERT_TRUE(computes_[s]->SaveCheckpoint(PendingStageFilePath(dir, "n1", s)).ok());
      }
    }
    if (point >= 3) {
      ASSERT_TRUE(common::WriteFileAtomically(StageSetMarkerPath(dir, "n1"), "x").ok());
    }
    if (point >= 4) {
      ASSERT_TRUE(common::RenameDurably(PendingStageFilePath(dir, "n1", 1),
                                        StageCheckpointPath(options_, 1))
                      .ok());
    }
    auto first = ResumeFromStageCheckpoints(options_, stages_);
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_EQ(*first, point >= 3 ? 5 : 3);
    EXPECT_EQ(computes_[1]->step(), *first);
    EXPECT_EQ(computes_[2]->step(), *first);
  }
}

}  // namespace
}  // namespace skipswarm::node
