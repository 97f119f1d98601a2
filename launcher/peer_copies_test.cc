#include "launcher/peer_copies.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "model/checkpoint.h"
#include "model/checkpoint_generation.h"
#include "model/stage_module.h"
#include "model/tiny_config.h"

namespace skipswarm::launcher {
namespace {

namespace fs = std::filesystem;
using model::testing::TinyConfig;

// model/testdata/v1_stage1_adamw.ckpt: stage 1 of the tiny model at step 5,
// written by the version-1 code (a libtorch archive).
constexpr char kV1Stage1[] = "model/testdata/v1_stage1_adamw.ckpt";
constexpr int64_t kIteration = 5;

// A generation at kIteration whose stage 1 file is gone.
std::string GenerationWithoutStage1(const std::string& name) {
  const std::string root = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
  fs::remove_all(root);
  std::map<int, std::string> bytes;
  for (int s = 0; s < 3; ++s) {
    model::StageModule m(TinyConfig(), s);
    bytes[s] = model::SerializeStageState(m, nullptr, kIteration).value();
  }
  EXPECT_TRUE(
      model::WriteGeneration(root, kIteration, TinyConfig().ConfigHash(), 3, bytes, 3).ok());
  fs::remove(absl::StrCat(model::GenerationDir(root, kIteration), "/stage-1.ckpt"));
  return root;
}

// A peer's copy is read later as a local file, which may be version 1: a
// version-1 copy (whose libtorch archive a hostile peer could shape to
// crash the loader) is not written into a generation; a version-2 one is.
TEST(RepairGenerationsTest, WritesVersionTwoCopiesOnly) {
  const std::string hash = TinyConfig().ConfigHash();
  const std::string v1_root = GenerationWithoutStage1("v1");
  PeerCopies v1 = {{kIteration, {common::ReadFileBytes(kV1Stage1).value(), "peer"}}};
  EXPECT_TRUE(RepairGenerations(v1_root, hash, 3, 1, v1, 3).empty());
  EXPECT_FALSE(model::CheckGeneration(model::GenerationDir(v1_root, kIteration), hash, 3).ok());

  const std::string v2_root = GenerationWithoutStage1("v2");
  model::StageModule m(TinyConfig(), 1);
  PeerCopies v2 = {{kIteration, {model::SerializeStageState(m, nullptr, kIteration).value(), "peer"}}};
  EXPECT_EQ(RepairGenerations(v2_root, hash, 3, 1, v2, 3), std::vector<int64_t>{kIteration});
  EXPECT_TRUE(model::CheckGeneration(model::GenerationDir(v2_root, kIteration), hash, 3).ok());
}

}  // namespace
}  // namespace skipswarm::launcher
