#include "launcher/stage_recovery.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "launcher/eval_snapshots.h"
#include "model/checkpoint.h"
#include "model/local_pipeline.h"
#include "model/model_config.h"
#include "model/tiny_config.h"
#include "node/daemon/stack/stage_set_commit.h"

namespace skipswarm::launcher {
namespace {

model::ModelConfig Tiny() {
  model::ModelConfig c = model::testing::TinyConfig();
  c.num_layers = 3;
  c.init_seed = 5;
  return c;
}

std::string FreshDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(base ? base : "/tmp", "/", name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

const LocalLayout kLayout = {{"d0", {0}}, {"d1", {0}}, {"s1r0", {1}},
                             {"s1r1", {1}}, {"s2r0", {2}}, {"s2r1", {2}}};

// The swarm's nodes write their stage checkpoints at `step` (what
// --node_checkpoint_every does), except those in `skip`.
void NodesCheckpoint(model::LocalPipeline& pipe, const std::string& dir, int64_t step,
                     const std::set<std::string>& skip = {}) {
  for (const auto& [name, stages] : kLayout) {
    if (skip.count(name) > 0) continue;
    for (int s : stages) {
      ASSERT_TRUE(model::SaveStageCheckpoint(absl::StrCat(dir, "/", name, "-stage-", s, ".ckpt"),
                                             pipe.stage(s).module(), nullptr, step)
                      .ok());
    }
  }
}

TEST(StageLossMonitorTest, AStageWithNoLiveHostIsLostNamingItsNodes) {
  StageLossMonitor monitor(kLayout);
  std::set<std::string> live = {"d0", "d1", "s1r0", "s2r0", "s2r1"};
  EXPECT_FALSE(monitor.Check(live, {{"s1r1", 30}}, 40).has_value());
  live.erase("s1r0");
  std::optional<LostStage> lost = monitor.Check(live, {{"s1r1", 30}, {"s1r0", 60}}, 61);
  ASSERT_TRUE(lost.has_value());
  EXPECT_EQ(lost->stage, 1);
  EXPECT_EQ(lost->after_iteration, 61);
  EXPECT_EQ(lost->why, "s1r0 killed after iteration 60, s1r1 killed after iteration 30");
}

// Note [How a node ended]: a node that ended by itself says how, so a
// crash does not read as a node that gave up.
TEST(StageLossMonitorTest, ANodeThatEndedByItselfSaysHow) {
  StageLossMonitor monitor(kLayout);
  const std::set<std::string> live = {"d0", "d1", "s1r0", "s1r1"};
  std::optional<LostStage> lost =
      monitor.Check(live, {}, -1,
                    {{"s2r0", "exited with code 1"}, {"s2r1", "killed by signal 11 (SIGSEGV)"}});
  ASSERT_TRUE(lost.has_value());
  EXPECT_EQ(lost->stage, 2);
  EXPECT_EQ(lost->why, "s2r0 exited with code 1, s2r1 killed by signal 11 (SIGSEGV)");
  // Without the ends (an older caller), "exited".
  EXPECT_EQ(monitor.Check(live, {}, -1)->why, "s2r0 exited, s2r1 exited");
}

// The whole recovery path of the launcher, without processes: generations
// assembled from the nodes' files, stage 1 lost, a torn newest generation
// skipped, every node seeded at one iteration, re-done progress dropped.
TEST(StageRecoveryTest, LostStageIsRestoredFromTheNewestCompleteGeneration) {
  const std::string root = FreshDir("recovery");
  const std::string ckpt = root + "/checkpoints", gens = root + "/generations";
  std::filesystem::create_directories(ckpt);
  auto pipe = *model::LocalPipeline::Create(Tiny());
  EvalSnapshots collector(ckpt, gens, 3, GenerationOptions{Tiny().ConfigHash(), 2});
  for (int64_t step : {10, 20, 30}) {
    NodesCheckpoint(*pipe, ckpt, step);
    EXPECT_EQ(collector.Poll(), std::vector<int64_t>{step});
  }
  // Only the newest two stay.
  EXPECT_EQ(model::ListGenerationFolders(gens), (std::vector<int64_t>{30, 20}));
  // Generation 30 is torn afterwards (its stage 2 file cut short).
  {
    std::ofstream f(model::GenerationDir(gens, 30) + "/stage-2.ckpt", std::ios::trunc);
    f << "x";
  }
  // Stage 1 at step 40 on one replica only, then both die: no generation 40.
  NodesCheckpoint(*pipe, ckpt, 40, {"d0", "d1", "s1r1", "s2r0", "s2r1"});
  EXPECT_TRUE(collector.Poll().empty());

  StageLossMonitor monitor(kLayout);
  std::optional<LostStage> lost =
      monitor.Check({"d0", "d1", "s2r0", "s2r1"}, {{"s1r0", 41}, {"s1r1", 25}}, 41);
  ASSERT_TRUE(lost.has_value());
  absl::StatusOr<RestorePlan> plan = PlanRestore(gens, Tiny().ConfigHash(), 3, *lost);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->resume_at, 20);
  EXPECT_EQ(plan->iterations_redone(), 22);  // iterations 20..41
  ASSERT_EQ(plan->generation.skipped.size(), 1u);
  EXPECT_TRUE(absl::StartsWith(plan->generation.skipped[0], "generation 30 skipped: stage 2"))
      << plan->generation.skipped[0];

  // s2r0 was killed in a save's commit (Note [Stage set commit]): its
  // pending file must not roll forward over the seeded one at its start.
  ASSERT_TRUE(common::WriteFileAtomically(node::PendingStageFilePath(ckpt, "s2r0", 2), "x").ok());
  ASSERT_TRUE(common::WriteFileAtomically(node::StageSetMarkerPath(ckpt, "s2r0"), "x").ok());
  ASSERT_TRUE(SeedNodeCheckpoints(*plan, ckpt, kLayout).ok());
  EXPECT_FALSE(std::filesystem::exists(node::PendingStageFilePath(ckpt, "s2r0", 2)));
  EXPECT_FALSE(std::filesystem::exists(node::StageSetMarkerPath(ckpt, "s2r0")));
  for (const auto& [name, stages] : kLayout) {
    for (int s : stages) {
      absl::StatusOr<std::string> bytes =
          common::ReadFileBytes(absl::StrCat(ckpt, "/", name, "-stage-", s, ".ckpt"));
      ASSERT_TRUE(bytes.ok()) << name;
      absl::StatusOr<model::CheckpointInfo> info = model::ReadCheckpointInfo(*bytes);
      ASSERT_TRUE(info.ok()) << name;
      EXPECT_EQ(info->step, 20) << name << " stage " << s;  // one consistent iteration
      EXPECT_EQ(info->stage, s);
    }
  }

  const std::string progress = root + "/progress.jsonl";
  {
    std::ofstream f(progress);
    for (int it = 0; it < 42; ++it) f << "{\"node\":\"d0\",\"iteration\":" << it << ",\"loss\":1}\n";
    f << "{\"node\":\"d0\",\"iter";  // cut short by the kill
  }
  ASSERT_TRUE(RewindProgress(progress, plan->resume_at, root + "/progress.before.jsonl").ok());
  std::ifstream in(progress);
  int lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  EXPECT_EQ(lines, 20);
  EXPECT_TRUE(absl::StrContains(DescribeRestore(*plan, 3.5),
                                "stage 1 restored from checkpoint generation 20"));
}

TEST(StageRecoveryTest, WithoutAGenerationTheRunStopsNamingTheStage) {
  const std::string root = FreshDir("recovery_none");
  LostStage lost{1, 61, "s1r0 killed after iteration 60, s1r1 killed after iteration 30"};
  absl::StatusOr<RestorePlan> plan = PlanRestore(root + "/generations", Tiny().ConfigHash(), 3, lost);
  ASSERT_FALSE(plan.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(plan.status()));
  EXPECT_TRUE(absl::StrContains(plan.status().message(), "stage 1 was lost")) << plan.status();
  EXPECT_TRUE(absl::StrContains(plan.status().message(), "cannot be restored")) << plan.status();
}

}  // namespace
}  // namespace skipswarm::launcher
