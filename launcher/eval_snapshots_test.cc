#include "launcher/eval_snapshots.h"

#include <cstdlib>
#include <filesystem>

#include "common/atomic_file.h"
#include "gtest/gtest.h"
#include "model/checkpoint.h"
#include "model/stage_module.h"

namespace skipswarm::launcher {
namespace {

namespace fs = std::filesystem;

std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(base ? base : "/tmp") + "/" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void Save(const std::string& path, int stage, int64_t step) {
  model::ModelConfig c;
  c.num_layers = 2;
  c.d_model = 8;
  c.num_heads = 2;
  c.ffn_dim = 8;
  c.vocab_size = 16;
  c.seq_len = 4;
  c.num_stages = 2;
  model::StageModule m(c, stage);
  ASSERT_TRUE(model::SaveStageCheckpoint(path, m, nullptr, step).ok());
}

int64_t StepOf(const std::string& path) {
  auto bytes = common::ReadFileBytes(path);
  if (!bytes.ok()) return -1;
  auto info = model::ReadCheckpointInfo(*bytes);
  return info.ok() ? info->step : -1;
}

TEST(EvalSnapshotsTest, TakesEachStepOnceEveryStageHasIt) {
  const std::string ckpt = TempDir("ckpt"), out = TempDir("evals");
  EvalSnapshots snaps(ckpt, out, 2);
  EXPECT_TRUE(snaps.Poll().empty());  // nothing yet
  Save(ckpt + "/d1-stage-0.ckpt", 0, 5);
  Save(ckpt + "/d0-stage-0.ckpt", 0, 5);
  EXPECT_TRUE(snaps.Poll().empty());  // stage 1 missing
  Save(ckpt + "/s1r0-stage-1.ckpt", 1, 5);
  EXPECT_EQ(snaps.Poll(), (std::vector<int64_t>{5}));
  const std::string five = EvalSnapshots::SnapshotDir(out, 5);
  EXPECT_EQ(five, out + "/iter-000005");
  EXPECT_EQ(StepOf(five + "/stage-0.ckpt"), 5);
  EXPECT_EQ(StepOf(five + "/stage-1.ckpt"), 5);
  EXPECT_TRUE(snaps.Poll().empty());  // taken once

  // The nodes move on one by one; step 10 is complete only with stage 1.
  Save(ckpt + "/d0-stage-0.ckpt", 0, 10);
  Save(ckpt + "/d1-stage-0.ckpt", 0, 10);
  EXPECT_TRUE(snaps.Poll().empty());
  Save(ckpt + "/s1r0-stage-1.ckpt", 1, 10);
  EXPECT_EQ(snaps.Poll(), (std::vector<int64_t>{10}));
  EXPECT_EQ(StepOf(EvalSnapshots::SnapshotDir(out, 10) + "/stage-1.ckpt"), 10);
  EXPECT_EQ(StepOf(five + "/stage-1.ckpt"), 5);  // the earlier snapshot is kept
  EXPECT_EQ(snaps.taken(), (std::set<int64_t>{5, 10}));
}

TEST(EvalSnapshotsTest, IgnoresOtherFilesAndAMissingFolder) {
  const std::string ckpt = TempDir("ckpt2"), out = TempDir("evals2");
  EXPECT_TRUE(EvalSnapshots(ckpt + "/absent", out, 1).Poll().empty());
  Save(ckpt + "/d0-stage-0.ckpt.tmp", 0, 3);
  Save(ckpt + "/notes.ckpt", 0, 3);
  EvalSnapshots snaps(ckpt, out, 1);
  EXPECT_TRUE(snaps.Poll().empty());
  Save(ckpt + "/d0-stage-0.ckpt", 0, 3);
  EXPECT_EQ(snaps.Poll(), (std::vector<int64_t>{3}));
}

}  // namespace
}  // namespace skipswarm::launcher
