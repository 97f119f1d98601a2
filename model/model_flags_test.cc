#include "model/model_flags.h"

#include <gtest/gtest.h>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"

ABSL_DECLARE_FLAG(int, layers);
ABSL_DECLARE_FLAG(int, stages);
ABSL_DECLARE_FLAG(int, heads);
ABSL_DECLARE_FLAG(double, lr);

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

}  // namespace
}  // namespace skipswarm::model
