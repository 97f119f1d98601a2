#include "node/daemon/stack/stage_set_commit.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "common/atomic_file.h"

namespace skipswarm::node {
namespace {

namespace fs = std::filesystem;

// Each "checkpoint" is the step as text; a crash is simulated by stopping
// the protocol of Note [Stage set commit] part-way.
class StageSetCommitTest : public ::testing::Test {
 protected:
  StageSetCommitTest()
      : dir_((fs::path(std::getenv("TEST_TMPDIR")) /
              ::testing::UnitTest::GetInstance()->current_test_info()->name())
                 .string()) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }

  // Step 1 of a save of stages 1 and 2 at `step`.
  void WritePending(const std::string& name, int step) {
    for (int s : {1, 2}) {
      ASSERT_TRUE(common::WriteFileAtomically(PendingStageFilePath(dir_, name, s),
                                              std::to_string(step))
                      .ok());
    }
  }
  // A whole save at `step`.
  void Save(const std::string& name, int step) {
    WritePending(name, step);
    ASSERT_TRUE(CommitStageSet(dir_, name).ok());
  }
  std::string Stage(const std::string& name, int s) {
    absl::StatusOr<std::string> bytes = common::ReadFileBytes(StageFilePath(dir_, name, s));
    return bytes.ok() ? *bytes : "missing";
  }
  bool Leftovers(const std::string& name) {
    return fs::exists(StageSetMarkerPath(dir_, name)) ||
           fs::exists(PendingStageFilePath(dir_, name, 1)) ||
           fs::exists(PendingStageFilePath(dir_, name, 2));
  }

  const std::string dir_;
};

TEST_F(StageSetCommitTest, ACommitMovesEveryStageAndLeavesNothingPending) {
  Save("n1", 3);
  EXPECT_EQ(Stage("n1", 1), "3");
  EXPECT_EQ(Stage("n1", 2), "3");
  EXPECT_FALSE(Leftovers("n1"));
  absl::StatusOr<std::string> done = RecoverStageSet(dir_, "n1");
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(*done, "");
}

// Killed before the marker: the new set is unfinished, the old one stands.
TEST_F(StageSetCommitTest, AnUnfinishedSaveIsDroppedAndTheOldSetStands) {
  Save("n1", 3);
  WritePending("n1", 5);
  absl::StatusOr<std::string> done = RecoverStageSet(dir_, "n1");
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_NE(done->find("dropped an unfinished save: 2 pending"), std::string::npos) << *done;
  EXPECT_EQ(Stage("n1", 1), "3");
  EXPECT_EQ(Stage("n1", 2), "3");
  EXPECT_FALSE(Leftovers("n1"));
}

// Killed after the marker, between the renames: stage 1 already at the new
// step, stage 2 still at the old one. The old code's save (stage files
// written in turn) left exactly this mix, which resume refused; the
// recovery finishes the set.
TEST_F(StageSetCommitTest, ASaveKilledBetweenRenamesIsFinished) {
  Save("n1", 3);
  WritePending("n1", 5);
  ASSERT_TRUE(common::WriteFileAtomically(StageSetMarkerPath(dir_, "n1"), "x").ok());
  ASSERT_TRUE(common::RenameDurably(PendingStageFilePath(dir_, "n1", 1),
                                    StageFilePath(dir_, "n1", 1))
                  .ok());
  EXPECT_EQ(Stage("n1", 1), "5");
  EXPECT_EQ(Stage("n1", 2), "3");
  absl::StatusOr<std::string> done = RecoverStageSet(dir_, "n1");
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_NE(done->find("finished an interrupted save: 1 stage file"), std::string::npos) << *done;
  EXPECT_EQ(Stage("n1", 1), "5");
  EXPECT_EQ(Stage("n1", 2), "5");
  EXPECT_FALSE(Leftovers("n1"));
}

TEST_F(StageSetCommitTest, ASaveKilledAfterTheMarkerBeforeAnyRenameIsFinished) {
  Save("n1", 3);
  WritePending("n1", 5);
  ASSERT_TRUE(common::WriteFileAtomically(StageSetMarkerPath(dir_, "n1"), "x").ok());
  ASSERT_TRUE(RecoverStageSet(dir_, "n1").ok());
  EXPECT_EQ(Stage("n1", 1), "5");
  EXPECT_EQ(Stage("n1", 2), "5");
  EXPECT_FALSE(Leftovers("n1"));
}

// The launcher's restore replaces the stage files: an interrupted save of
// the killed node must not roll forward over them.
TEST_F(StageSetCommitTest, DiscardRemovesPendingFilesAndTheMarker) {
  Save("n1", 3);
  WritePending("n1", 5);
  ASSERT_TRUE(common::WriteFileAtomically(StageSetMarkerPath(dir_, "n1"), "x").ok());
  ASSERT_TRUE(DiscardStageSet(dir_, "n1").ok());
  EXPECT_FALSE(Leftovers("n1"));
  ASSERT_TRUE(RecoverStageSet(dir_, "n1").ok());
  EXPECT_EQ(Stage("n1", 1), "3");
  EXPECT_EQ(Stage("n1", 2), "3");
}

TEST_F(StageSetCommitTest, ANodesRecoveryLeavesOtherNodesFilesAlone) {
  Save("n1", 3);
  WritePending("n10", 7);  // n10's unfinished save: n1's recovery must not see it
  WritePending("n1", 5);
  ASSERT_TRUE(common::WriteFileAtomically(StageSetMarkerPath(dir_, "n1"), "x").ok());
  ASSERT_TRUE(RecoverStageSet(dir_, "n1").ok());
  EXPECT_EQ(Stage("n1", 2), "5");
  EXPECT_EQ(Stage("n10", 1), "missing");
  EXPECT_TRUE(fs::exists(PendingStageFilePath(dir_, "n10", 1)));
}

}  // namespace
}  // namespace skipswarm::node
