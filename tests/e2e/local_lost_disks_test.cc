// `skipswarm local --local_lose_disks`: a stage loses every replica and
// their disks (Note [Lost disks], launcher/peer_copies.h): the dead nodes'
// checkpoints and the stage's files in every generation are deleted before
// the restore. The stage comes back from a checkpoint copy a live peer holds
// (Note [Checkpoint copies], node/daemon/gossip/checkpoint_copies.h),
// fetched over the state-transfer channel; the run completes with a finite
// loss. Without copies (--local_checkpoint_copies=0) the same loss stops the
// run with an error naming the stage.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/tiny_model.h"
#include "tests/harness/skipswarm_process.h"

namespace skipswarm::tests {
namespace {

TEST(LocalLostDisksTest, AStageWhoseDisksAreGoneIsRestoredFromAPeersCopy) {
  const std::string dir = *MakeTestDir("local_lost_disks");
  std::vector<std::string> args = TinyModelArgs("local");
  args.insert(args.end(), {"--local_dir=" + dir + "/run", "--local_iterations=70",
                           "--local_checkpoint_every=10", "--kill=s1r1@20,s1r0@40",
                           "--local_lose_disks"});
  absl::StatusOr<ProcessResult> r = RunSkipswarm(args, dir);
  ASSERT_TRUE(r.ok()) << r.status();
  // The run's folder goes with the test's: a failure prints the nodes' logs.
  const std::string logs = dir + "/run/logs";
  ASSERT_EQ(r->exit_code, 0) << r->out << r->err << NodeLogTails(logs);
  EXPECT_TRUE(absl::StrContains(r->out, "lost disks: deleted")) << r->out << NodeLogTails(logs);
  EXPECT_TRUE(absl::StrContains(r->out, "comes from the checkpoint copy held by"))
      << r->out << NodeLogTails(logs);
  EXPECT_TRUE(absl::StrContains(r->out, "it 70/70")) << r->out << NodeLogTails(logs);
  absl::StatusOr<std::string> report = ReadFile(dir + "/run/recovery.jsonl");
  ASSERT_TRUE(report.ok()) << report.status();
  const std::vector<std::string> lines = Lines(*report);
  ASSERT_EQ(lines.size(), 1u) << *report;
  const nlohmann::json j = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(j["stage"], 1);
  EXPECT_NE(j["from_peer_copy"].get<std::string>(), "") << lines[0];
  EXPECT_FALSE(absl::StartsWith(j["from_peer_copy"].get<std::string>(), "s1")) << lines[0];
  EXPECT_EQ(j["resumed_at_iteration"].get<int64_t>() % 10, 0);
  std::printf("lost disks restore: %s\n", lines[0].c_str());
}

TEST(LocalLostDisksTest, WithoutPeerCopiesTheRunStopsNamingTheStage) {
  const std::string dir = *MakeTestDir("local_lost_disks_no_copies");
  std::vector<std::string> args = TinyModelArgs("local");
  args.insert(args.end(), {"--local_dir=" + dir + "/run", "--local_iterations=60",
                           "--local_checkpoint_every=10", "--kill=s1r1@15,s1r0@25",
                           "--local_lose_disks", "--local_checkpoint_copies=0"});
  absl::StatusOr<ProcessResult> r = RunSkipswarm(args, dir);
  ASSERT_TRUE(r.ok()) << r.status();
  const std::string logs = dir + "/run/logs";
  EXPECT_EQ(r->exit_code, 1) << r->out << r->err << NodeLogTails(logs);
  EXPECT_TRUE(absl::StrContains(r->out + r->err, "stage 1 was lost"))
      << r->out << r->err << NodeLogTails(logs);
}

}  // namespace
}  // namespace skipswarm::tests
