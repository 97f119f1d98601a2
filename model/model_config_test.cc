#include "model/model_config.h"

#include <gtest/gtest.h>

namespace skipswarm::model {
namespace {

TEST(ModelConfigTest, DefaultIsValidSmallModel) {
  ModelConfig c;
  ASSERT_TRUE(c.Validate().ok());
  EXPECT_GE(c.ParameterCount(), 5'000'000);
  EXPECT_LE(c.ParameterCount(), 20'000'000);
}

TEST(ModelConfigTest, StagesCoverAllBlocksInOrder) {
  ModelConfig c;
  c.num_layers = 14;
  c.num_stages = 4;
  int next = 0;
  for (int s = 0; s < c.num_stages; ++s) {
    auto [first, end] = c.StageBlocks(s);
    EXPECT_EQ(first, next);
    EXPECT_GE(end - first, 3);
    EXPECT_LE(end - first, 4);
    next = end;
  }
  EXPECT_EQ(next, 14);
}

TEST(ModelConfigTest, RejectsBadFields) {
  ModelConfig c;
  c.num_heads = 7;
  EXPECT_EQ(c.Validate().code(), absl::StatusCode::kInvalidArgument);
  c = ModelConfig();
  c.num_stages = 13;
  EXPECT_FALSE(c.Validate().ok());
}

TEST(ModelConfigTest, JsonRoundTripAndHash) {
  ModelConfig c;
  c.num_layers = 6;
  c.tie_embeddings = false;
  absl::StatusOr<ModelConfig> back = ModelConfigFromJson(ModelConfigToJson(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->num_layers, 6);
  EXPECT_FALSE(back->tie_embeddings);
  EXPECT_EQ(back->ConfigHash(), c.ConfigHash());
  EXPECT_NE(ModelConfig().ConfigHash(), c.ConfigHash());
  EXPECT_EQ(c.ConfigHash().size(), 16u);
}

TEST(ModelConfigTest, DiffNamesOnlyTheFieldsThatDiffer) {
  ModelConfig a, b;
  EXPECT_EQ(ModelConfigDiff(a, b), "");
  b.seq_len = 64;
  EXPECT_EQ(ModelConfigDiff(a, b), "seq_len 128 vs 64");
  b.rope_theta = 500.0;
  const std::string diff = ModelConfigDiff(a, b);
  EXPECT_NE(diff.find("seq_len 128 vs 64"), std::string::npos) << diff;
  EXPECT_NE(diff.find("rope_theta"), std::string::npos) << diff;
  EXPECT_EQ(diff.find("d_model"), std::string::npos) << diff;
}

TEST(ModelConfigTest, JsonRejectsUnknownFieldAndGarbage) {
  EXPECT_FALSE(ModelConfigFromJson(R"({"num_layer": 3})").ok());
  EXPECT_FALSE(ModelConfigFromJson("not json").ok());
  EXPECT_FALSE(ModelConfigFromJson(R"({"num_layers": "x"})").ok());
  EXPECT_TRUE(ModelConfigFromJson(R"({"num_layers": 6})").ok());
}

}  // namespace
}  // namespace skipswarm::model
