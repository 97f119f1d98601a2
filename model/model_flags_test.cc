#include "model/model_flags.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"

ABSL_DECLARE_FLAG(std::string, model);
ABSL_DECLARE_FLAG(int, layers);
ABSL_DECLARE_FLAG(int, seq_len);
ABSL_DECLARE_FLAG(int, stages);
ABSL_DECLARE_FLAG(int, heads);
ABSL_DECLARE_FLAG(double, lr);
ABSL_DECLARE_FLAG(double, grad_clip);
ABSL_DECLARE_FLAG(int, threads);
ABSL_DECLARE_FLAG(int, samples_per_mb);

namespace skipswarm::model {
namespace {

TEST(ModelFlagsTest, DefaultsAreTheDefaultModel) {
  absl::StatusOr<ModelFlags> f = ReadModelFlags();
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->model.ConfigHash(), ModelConfig().ConfigHash());
  EXPECT_EQ(f->runtime.device, "cpu");
}

TEST(ModelFlagsTest, FlagsChangeTheConfigAndBadOnesAreRejected) {
  absl::SetFlag(&FLAGS_layers, 8);
  absl::SetFlag(&FLAGS_stages, 4);
  absl::StatusOr<ModelFlags> f = ReadModelFlags();
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->model.num_layers, 8);
  EXPECT_EQ(f->model.StageBlocks(3), std::make_pair(6, 8));
  absl::SetFlag(&FLAGS_heads, 7);
  EXPECT_EQ(ReadModelFlags().status().code(), absl::StatusCode::kInvalidArgument);
  absl::SetFlag(&FLAGS_heads, 8);
  absl::SetFlag(&FLAGS_lr, -1.0);
  EXPECT_EQ(ReadModelFlags().status().code(), absl::StatusCode::kInvalidArgument);
}

// Values the parser used to accept: a non-finite learning rate or clip, a
// negative thread count, a micro-batch whose token count overflows.
TEST(ModelFlagsTest, NonFiniteAndOutOfRangeValuesAreRejectedNamingTheFlag) {
  auto rejects = [](const std::string& flag) {
    absl::Status s = ReadModelFlags().status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << flag << ": " << s;
    EXPECT_NE(s.message().find(flag), std::string::npos) << s;
  };
  absl::SetFlag(&FLAGS_lr, 1e-3);  // the test before leaves a bad one
  ASSERT_TRUE(ReadModelFlags().ok()) << ReadModelFlags().status();
  absl::SetFlag(&FLAGS_lr, std::numeric_limits<double>::infinity());
  rejects("--lr");
  absl::SetFlag(&FLAGS_lr, 1e-3);
  absl::SetFlag(&FLAGS_grad_clip, std::numeric_limits<double>::quiet_NaN());
  rejects("--grad_clip");
  absl::SetFlag(&FLAGS_grad_clip, 1.0);
  absl::SetFlag(&FLAGS_threads, -5);
  rejects("--threads");
  absl::SetFlag(&FLAGS_threads, 0);
  absl::SetFlag(&FLAGS_samples_per_mb, 1000000000);
  rejects("--samples_per_mb");
  absl::SetFlag(&FLAGS_samples_per_mb, 4);
  EXPECT_TRUE(ReadModelFlags().ok());
}

// Note [Memory estimate]: a model that cannot fit is refused with the
// estimate printed, instead of being stopped by the OS.
TEST(ModelFlagsTest, AModelThatDoesNotFitIsRefusedWithTheEstimate) {
  ModelFlags f;
  const int64_t small = EstimateTrainingBytes(f, 1000000, 12, 2);
  EXPECT_TRUE(CheckFitsInMemory(small, uint64_t{64} << 30, "train-ref").ok());
  const int64_t big = EstimateTrainingBytes(f, int64_t{1} << 30, 12, 2);  // 1 G parameters
  EXPECT_GT(big, int64_t{16} << 30);
  absl::Status s = CheckFitsInMemory(big, uint64_t{8} << 30, "train-ref");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find("GiB"), std::string::npos) << s;
  EXPECT_NE(s.message().find("8.0 GiB"), std::string::npos) << s;
}

TEST(ModelFlagsTest, PresetSetsTheShapeAndGivenFlagsOverrideIt) {
  absl::SetFlag(&FLAGS_layers, 12);
  absl::SetFlag(&FLAGS_stages, 6);
  absl::SetFlag(&FLAGS_heads, 8);
  absl::SetFlag(&FLAGS_seq_len, 128);
  absl::SetFlag(&FLAGS_model, std::string("125m"));
  absl::StatusOr<ModelFlags> f = ReadModelFlags();
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->model.d_model, 768);
  EXPECT_EQ(f->model.num_heads, 12);
  EXPECT_EQ(f->model.seq_len, 1024);
  absl::SetFlag(&FLAGS_layers, 6);  // differs from its default: overrides
  f = ReadModelFlags();
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->model.num_layers, 6);
  EXPECT_EQ(f->model.d_model, 768);
  absl::SetFlag(&FLAGS_model, std::string("7b"));
  absl::Status s = ReadModelFlags().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("125m"), std::string::npos) << s;
  absl::SetFlag(&FLAGS_model, std::string());
  absl::SetFlag(&FLAGS_layers, 12);
}

}  // namespace
}  // namespace skipswarm::model
