// `skipswarm local` when both replicas of a stage are killed: the run must
// not end "successfully" with empty iterations (it used to print
// `40/40 ... loss nan` and exit 0). Without checkpoint generations
// (--local_checkpoint_every=0) nothing can restore it: the run stops with an
// error naming the lost stage and exits non-zero (local_stage_restore_test:
// with generations it is restored).
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/e2e/tiny_model.h"
#include "tests/harness/skipswarm_process.h"

namespace skipswarm::tests {
namespace {

TEST(LocalStageLossTest, LosingEveryReplicaOfAStageFailsNamingTheStage) {
  const std::string dir = *MakeTestDir("local_stage_loss");
  std::vector<std::string> args = TinyModelArgs("local");
  args.insert(args.end(), {"--local_dir=" + dir + "/run", "--local_iterations=60",
                           "--local_checkpoint_every=0", "--kill=s1r1@3,s1r0@6"});
  absl::StatusOr<ProcessResult> r = RunSkipswarm(args, dir);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NE(r->exit_code, 0) << r->out << r->err;
  EXPECT_TRUE(absl::StrContains(r->err, "stage 1 was lost")) << r->out << r->err;
  EXPECT_FALSE(absl::StrContains(r->out, "it 60/60")) << r->out;
}

TEST(LocalStageLossTest, AKillOfANodeThatDoesNotExistIsRefused) {
  const std::string dir = *MakeTestDir("local_kill_unknown");
  std::vector<std::string> args = TinyModelArgs("local");
  args.insert(args.end(), {"--local_dir=" + dir + "/run", "--local_iterations=3",
                           "--kill=s9r9@1"});
  absl::StatusOr<ProcessResult> r = RunSkipswarm(args, dir);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NE(r->exit_code, 0) << r->out << r->err;
  EXPECT_TRUE(absl::StrContains(r->err, "--kill names no node: 's9r9'")) << r->err;
}

TEST(LocalStageLossTest, ALocalDirNotMadeByTheLauncherIsNotDeleted) {
  const std::string dir = *MakeTestDir("local_dir_foreign");
  std::filesystem::create_directories(dir + "/mine");
  ASSERT_TRUE(WriteFile(dir + "/mine/precious.txt", "keep me").ok());
  std::vector<std::string> args = TinyModelArgs("local");
  args.insert(args.end(), {"--local_dir=" + dir + "/mine", "--local_iterations=1"});
  absl::StatusOr<ProcessResult> r = RunSkipswarm(args, dir);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NE(r->exit_code, 0) << r->out << r->err;
  EXPECT_TRUE(absl::StrContains(r->err, "refusing to delete it")) << r->err;
  absl::StatusOr<std::string> kept = ReadFile(dir + "/mine/precious.txt");
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(*kept, "keep me");
}

}  // namespace
}  // namespace skipswarm::tests
