// `skipswarm local` losing every replica of a stage, with checkpoint
// generations (the default --local_checkpoint_every): the launcher pauses
// training, restores the stage from the newest complete generation, every
// node resumes at its iteration and the run completes with a finite loss
// (Note [Local stage restore], launcher/stage_recovery.h). The run used to
// stop with "stage 1 was lost" (and before that, print `loss nan`, exit 0).
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/tiny_model.h"
#include "tests/harness/skipswarm_process.h"

namespace skipswarm::tests {
namespace {

TEST(LocalStageRestoreTest, LosingEveryReplicaOfAStageIsRestoredFromAGeneration) {
  const std::string dir = *MakeTestDir("local_stage_restore");
  std::vector<std::string> args = TinyModelArgs("local");
  args.insert(args.end(), {"--local_dir=" + dir + "/run", "--local_iterations=90",
                           "--local_checkpoint_every=10", "--kill=s1r1@30,s1r0@60"});
  absl::StatusOr<ProcessResult> r = RunSkipswarm(args, dir);
  ASSERT_TRUE(r.ok()) << r.status();
  // Exit 0 only with every iteration trained and a finite last loss (the
  // launcher's own check).
  ASSERT_EQ(r->exit_code, 0) << r->out << r->err;
  EXPECT_TRUE(absl::StrContains(r->out, "training paused: stage 1 has no live replica")) << r->out;
  EXPECT_TRUE(absl::StrContains(r->out, "stage 1 restored from checkpoint generation")) << r->out;
  EXPECT_TRUE(absl::StrContains(r->out, "it 90/90")) << r->out;
  absl::StatusOr<std::string> report = ReadFile(dir + "/run/recovery.jsonl");
  ASSERT_TRUE(report.ok()) << report.status();
  const std::vector<std::string> lines = Lines(*report);
  ASSERT_EQ(lines.size(), 1u) << *report;
  const nlohmann::json j = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(j["stage"], 1);
  const int64_t resumed = j["resumed_at_iteration"].get<int64_t>();
  const int64_t lost_after = j["lost_after_iteration"].get<int64_t>();
  EXPECT_EQ(resumed % 10, 0);
  EXPECT_GE(resumed, 10);
  EXPECT_LE(resumed, lost_after + 1);
  EXPECT_EQ(j["iterations_redone"].get<int64_t>(), lost_after + 1 - resumed);
  // Printed for the figures (tests/README.md).
  std::printf("stage restore: %s\n", lines[0].c_str());
}

}  // namespace
}  // namespace skipswarm::tests
