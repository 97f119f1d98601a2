#include "model/checkpoint_generation.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "model/checkpoint.h"
#include "model/local_pipeline.h"
#include "model/test_util.h"

namespace skipswarm::model {
namespace {

using testing::TinyConfig;
using testing::FreshTestDir;

// Every stage's checkpoint bytes of the tiny model at step `step`.
std::map<int, std::string> StagesAt(LocalPipeline& pipe, int64_t step) {
  std::map<int, std::string> out;
  for (int s = 0; s < pipe.num_stages(); ++s) {
    out[s] = *SerializeStageState(pipe.stage(s).module(), nullptr, step);
  }
  return out;
}

class CheckpointGenerationTest : public ::testing::Test {
 protected:
  void SetUp() override { pipe_ = *LocalPipeline::Create(TinyConfig()); }
  std::string hash() const { return TinyConfig().ConfigHash(); }
  std::unique_ptr<LocalPipeline> pipe_;
};

TEST_F(CheckpointGenerationTest, NewestCompleteGenerationIsFoundAndVerified) {
  const std::string root = FreshTestDir("gen_newest");
  ASSERT_TRUE(WriteGeneration(root, 10, hash(), 3, StagesAt(*pipe_, 10), 3).ok());
  ASSERT_TRUE(WriteGeneration(root, 20, hash(), 3, StagesAt(*pipe_, 20), 3).ok());
  absl::StatusOr<FoundGeneration> g = FindNewestCompleteGeneration(root, hash(), 3);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->manifest.iteration, 20);
  EXPECT_TRUE(g->skipped.empty());
  absl::StatusOr<std::string> bytes = common::ReadFileBytes(g->StagePath(2));
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(ReadCheckpointInfo(*bytes)->step, 20);
  EXPECT_EQ(g->manifest.stages.at(2).sha256, Sha256Hex(*bytes));
}

TEST_F(CheckpointGenerationTest, ATornGenerationIsSkippedWithAMessage) {
  const std::string root = FreshTestDir("gen_torn");
  ASSERT_TRUE(WriteGeneration(root, 10, hash(), 3, StagesAt(*pipe_, 10), 3).ok());
  ASSERT_TRUE(WriteGeneration(root, 20, hash(), 3, StagesAt(*pipe_, 20), 3).ok());
  // Generation 30 cut short: stage files written, the process died before
  // the manifest.
  const std::string torn = GenerationDir(root, 30);
  std::filesystem::create_directories(torn);
  for (const auto& [s, bytes] : StagesAt(*pipe_, 30)) {
    ASSERT_TRUE(common::WriteFileAtomically(absl::StrCat(torn, "/stage-", s, ".ckpt"), bytes).ok());
  }
  // Generation 20's stage 1 changed after its manifest (a partial copy).
  {
    std::ofstream f(GenerationDir(root, 20) + "/stage-1.ckpt",
                    std::ios::binary | std::ios::trunc);
    f << "cut";
  }
  absl::StatusOr<FoundGeneration> g = FindNewestCompleteGeneration(root, hash(), 3);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->manifest.iteration, 10);
  ASSERT_EQ(g->skipped.size(), 2u);
  EXPECT_NE(g->skipped[0].find("generation 30 skipped: no manifest"), std::string::npos)
      << g->skipped[0];
  EXPECT_NE(g->skipped[1].find("generation 20 skipped: stage 1"), std::string::npos)
      << g->skipped[1];
}

TEST_F(CheckpointGenerationTest, NoCompleteGenerationIsNotFoundNamingWhatWasSkipped) {
  const std::string root = FreshTestDir("gen_none");
  EXPECT_TRUE(absl::IsNotFound(FindNewestCompleteGeneration(root, hash(), 3).status()));
  ASSERT_TRUE(WriteGeneration(root, 5, hash(), 3, StagesAt(*pipe_, 5), 3).ok());
  std::filesystem::remove(GenerationDir(root, 5) + "/stage-0.ckpt");
  absl::Status s = FindNewestCompleteGeneration(root, hash(), 3).status();
  EXPECT_TRUE(absl::IsNotFound(s));
  EXPECT_NE(s.message().find("generation 5 skipped: stage 0 file unreadable"), std::string::npos)
      << s;
}

TEST_F(CheckpointGenerationTest, OnlyTheNewestKeepGenerationsStay) {
  const std::string root = FreshTestDir("gen_keep");
  for (int64_t it : {10, 20, 30, 40}) {
    ASSERT_TRUE(WriteGeneration(root, it, hash(), 3, StagesAt(*pipe_, it), 2).ok());
  }
  EXPECT_EQ(ListGenerationFolders(root), (std::vector<int64_t>{40, 30}));
}

TEST_F(CheckpointGenerationTest, MismatchedStagesAndModelsAreRefused) {
  const std::string root = FreshTestDir("gen_refused");
  std::map<int, std::string> stages = StagesAt(*pipe_, 10);
  // A stage at another step: not a consistent generation.
  stages[1] = *SerializeStageState(pipe_->stage(1).module(), nullptr, 11);
  EXPECT_TRUE(absl::IsInvalidArgument(WriteGeneration(root, 10, hash(), 3, stages, 3)));
  stages.erase(1);
  EXPECT_TRUE(absl::IsInvalidArgument(WriteGeneration(root, 10, hash(), 3, stages, 3)));
  EXPECT_TRUE(absl::IsInvalidArgument(
      WriteGeneration(root, 10, "another-model", 3, StagesAt(*pipe_, 10), 3)));
  ASSERT_TRUE(WriteGeneration(root, 10, hash(), 3, StagesAt(*pipe_, 10), 3).ok());
  // Written for this model, not found for another one.
  absl::Status other = FindNewestCompleteGeneration(root, "another-model", 3).status();
  EXPECT_NE(other.message().find("another model config"), std::string::npos) << other;
}

}  // namespace
}  // namespace skipswarm::model
