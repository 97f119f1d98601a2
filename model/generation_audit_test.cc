#include "model/generation_audit.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "model/checkpoint.h"
#include "model/checkpoint_generation.h"
#include "model/local_pipeline.h"
#include "model/test_util.h"

namespace skipswarm::model {
namespace {

using testing::TinyConfig;
using testing::FreshTestDir;

class GenerationAuditTest : public ::testing::Test {
 protected:
  void SetUp() override { pipe_ = *LocalPipeline::Create(TinyConfig()); }

  void Write(const std::string& root, int64_t step) {
    std::map<int, std::string> stages;
    for (int s = 0; s < pipe_->num_stages(); ++s) {
      stages[s] = *SerializeStageState(pipe_->stage(s).module(), nullptr, step);
    }
    ASSERT_TRUE(WriteGeneration(root, step, TinyConfig().ConfigHash(), 3, stages, 5).ok());
  }

  // Generation `step` cut short: one stage file, no manifest.
  void WriteTorn(const std::string& root, int64_t step) {
    const std::string dir = GenerationDir(root, step);
    std::filesystem::create_directories(dir);
    ASSERT_TRUE(common::WriteFileAtomically(
                    dir + "/stage-0.ckpt",
                    *SerializeStageState(pipe_->stage(0).module(), nullptr, step))
                    .ok());
  }

  std::unique_ptr<LocalPipeline> pipe_;
};

TEST_F(GenerationAuditTest, WholeGenerationsAreConsistent) {
  const std::string root = FreshTestDir("audit_whole");
  Write(root, 10);
  Write(root, 20);
  absl::StatusOr<GenerationAudit> a = AuditGenerations(root);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->config_hash, TinyConfig().ConfigHash());
  EXPECT_EQ(a->num_stages, 3);
  EXPECT_EQ(a->Complete(), 2);
  EXPECT_EQ(a->Lost(), 0);
  EXPECT_EQ(a->NewestComplete(), 20);
  EXPECT_TRUE(a->Consistent());
}

// A crash mid-write leaves the newest folder torn: a restore skips it, and
// the root is still consistent.
TEST_F(GenerationAuditTest, OnlyTheNewestFolderMayBeTorn) {
  const std::string root = FreshTestDir("audit_newest_torn");
  Write(root, 10);
  Write(root, 20);
  WriteTorn(root, 30);
  absl::StatusOr<GenerationAudit> a = AuditGenerations(root);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->folders.size(), 3u);
  EXPECT_EQ(a->folders[0].iteration, 30);
  EXPECT_TRUE(absl::IsNotFound(a->folders[0].status)) << a->folders[0].status;
  EXPECT_EQ(a->Lost(), 0);
  EXPECT_EQ(a->NewestComplete(), 20);
  EXPECT_TRUE(a->Consistent());
}

TEST_F(GenerationAuditTest, ADamagedOlderGenerationIsLost) {
  const std::string root = FreshTestDir("audit_damaged");
  Write(root, 10);
  Write(root, 20);
  Write(root, 30);
  {
    std::ofstream f(GenerationDir(root, 20) + "/stage-2.ckpt", std::ios::binary | std::ios::trunc);
    f << "cut";
  }
  absl::StatusOr<GenerationAudit> a = AuditGenerations(root);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->Complete(), 2);
  EXPECT_EQ(a->Lost(), 1);
  EXPECT_TRUE(absl::IsDataLoss(a->folders[1].status)) << a->folders[1].status;
  EXPECT_FALSE(a->Consistent());
}

TEST_F(GenerationAuditTest, TwoTornFoldersAreOneLostGeneration) {
  const std::string root = FreshTestDir("audit_two_torn");
  Write(root, 10);
  WriteTorn(root, 20);
  WriteTorn(root, 30);
  absl::StatusOr<GenerationAudit> a = AuditGenerations(root);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->Lost(), 1);
  EXPECT_FALSE(a->Consistent());
}

TEST_F(GenerationAuditTest, ARootWithoutAnyManifestIsNotFound) {
  const std::string root = FreshTestDir("audit_none");
  EXPECT_TRUE(absl::IsNotFound(AuditGenerations(root).status()));
  WriteTorn(root, 10);
  absl::Status s = AuditGenerations(root).status();
  EXPECT_TRUE(absl::IsNotFound(s));
  EXPECT_NE(s.message().find("1 generation folders"), std::string::npos) << s;
}

}  // namespace
}  // namespace skipswarm::model
