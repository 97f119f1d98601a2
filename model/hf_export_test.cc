#include "model/hf_export.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <cstring>

#include "common/atomic_file.h"
#include "model/checkpoint.h"
#include "model/presets.h"
#include "model/safetensors.h"
#include "nlohmann/json.hpp"

namespace skipswarm::model {
namespace {

std::vector<std::shared_ptr<StageModule>> Stages(const ModelConfig& c) {
  std::vector<std::shared_ptr<StageModule>> stages;
  for (int s = 0; s < c.num_stages; ++s) stages.push_back(std::make_shared<StageModule>(c, s));
  return stages;
}

std::string TempDir(const std::string& name) {
  const char* root = std::getenv("TEST_TMPDIR");
  return std::string(root ? root : "/tmp") + "/" + name;
}

TEST(HfExportTest, NamesFollowLlamaForCausalLM) {
  EXPECT_EQ(*HfTensorName("embedding"), "model.embed_tokens.weight");
  EXPECT_EQ(*HfTensorName("block_7.wq"), "model.layers.7.self_attn.q_proj.weight");
  EXPECT_EQ(*HfTensorName("block_0.mlp_norm"), "model.layers.0.post_attention_layernorm.weight");
  EXPECT_EQ(*HfTensorName("block_11.w_down"), "model.layers.11.mlp.down_proj.weight");
  EXPECT_EQ(*HfTensorName("final_norm"), "model.norm.weight");
  EXPECT_FALSE(HfTensorName("block_x.wq").ok());
  EXPECT_FALSE(HfTensorName("rope_cos").ok());
}

TEST(HfExportTest, WritesEveryTensorWithItsShapeAndBytes) {
  ModelConfig c = *ModelPreset("tiny");
  auto stages = Stages(c);
  const std::string dir = TempDir("hf_tiny");
  ASSERT_TRUE(ExportHuggingFace(stages, dir, HfExportOptions{}).ok());

  absl::StatusOr<std::string> file = common::ReadFileBytes(dir + "/model.safetensors");
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<SafetensorsIndex> index = ReadSafetensorsIndex(*file);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->data_start % 8, 0);
  EXPECT_EQ(index->metadata.at("format"), "pt");
  // embed + 9 per layer + final norm; tied: no lm_head.
  EXPECT_EQ(index->tensors.size(), 1u + 9u * c.num_layers + 1u);
  EXPECT_EQ(index->tensors.count("lm_head.weight"), 0u);
  const int64_t d = c.d_model, f = c.ffn_dim;
  EXPECT_EQ(index->tensors.at("model.embed_tokens.weight").shape,
            (std::vector<int64_t>{c.vocab_size, d}));
  EXPECT_EQ(index->tensors.at("model.layers.2.mlp.gate_proj.weight").shape,
            (std::vector<int64_t>{f, d}));
  EXPECT_EQ(index->tensors.at("model.layers.2.mlp.down_proj.weight").shape,
            (std::vector<int64_t>{d, f}));
  EXPECT_EQ(index->tensors.at("model.norm.weight").shape, (std::vector<int64_t>{d}));
  int64_t params = 0;
  for (const auto& [name, e] : index->tensors) {
    EXPECT_EQ(e.dtype, "F32") << name;
    params += (e.end - e.begin) / 4;
  }
  EXPECT_EQ(params, c.ParameterCount());

  // The bytes are the parameter's: block 1 lives in stage 1 of 3.
  const SafetensorsEntry& wk = index->tensors.at("model.layers.1.self_attn.k_proj.weight");
  at::Tensor ours = stages[1]->named_parameters()["block_1.wk"].contiguous();
  ASSERT_EQ(wk.end - wk.begin, static_cast<int64_t>(ours.nbytes()));
  EXPECT_EQ(std::memcmp(file->data() + index->data_start + wk.begin, ours.data_ptr(),
                        ours.nbytes()),
            0);

  nlohmann::json config = nlohmann::json::parse(*common::ReadFileBytes(dir + "/config.json"));
  EXPECT_EQ(config["architectures"][0], "LlamaForCausalLM");
  EXPECT_EQ(config["hidden_size"], d);
  EXPECT_EQ(config["intermediate_size"], f);
  EXPECT_EQ(config["num_hidden_layers"], c.num_layers);
  EXPECT_EQ(config["num_key_value_heads"], c.num_heads);
  EXPECT_EQ(config["tie_word_embeddings"], true);
  EXPECT_DOUBLE_EQ(config["rms_norm_eps"].get<double>(), c.norm_eps);

  absl::StatusOr<std::string> ref = common::ReadFileBytes(dir + "/skipswarm_reference.safetensors");
  ASSERT_TRUE(ref.ok());
  absl::StatusOr<SafetensorsIndex> ref_index = ReadSafetensorsIndex(*ref);
  ASSERT_TRUE(ref_index.ok()) << ref_index.status();
  EXPECT_EQ(ref_index->tensors.at("logits").shape,
            (std::vector<int64_t>{2, c.seq_len, c.vocab_size}));
  EXPECT_EQ(ref_index->tensors.at("tokens").dtype, "I64");
}

TEST(HfExportTest, UntiedHeadIsExportedAndPartialModelsAreRefused) {
  ModelConfig c = *ModelPreset("tiny");
  c.tie_embeddings = false;
  auto stages = Stages(c);
  const std::string dir = TempDir("hf_untied");
  ASSERT_TRUE(ExportHuggingFace(stages, dir, HfExportOptions{false}).ok());
  absl::StatusOr<SafetensorsIndex> index =
      ReadSafetensorsIndex(*common::ReadFileBytes(dir + "/model.safetensors"));
  ASSERT_TRUE(index.ok());
  EXPECT_EQ(index->tensors.count("lm_head.weight"), 1u);
  EXPECT_FALSE(std::filesystem::exists(dir + "/skipswarm_reference.safetensors"));
  stages.pop_back();
  EXPECT_EQ(ExportHuggingFace(stages, dir, HfExportOptions{}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SafetensorsTest, HeaderIsPaddedAndChecksSizes) {
  const float w[6] = {1, 2, 3, 4, 5, 6};
  absl::string_view bytes(reinterpret_cast<const char*>(w), sizeof(w));
  absl::StatusOr<std::string> h = SafetensorsHeader({{"w", "F32", {2, 3}, bytes}}, {});
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->size() % 8, 0u);
  EXPECT_EQ(static_cast<unsigned char>((*h)[0]), h->size() - 8);
  absl::StatusOr<SafetensorsIndex> index = ReadSafetensorsIndex(*h + std::string(bytes));
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->tensors.at("w").end, 24);
  EXPECT_FALSE(SafetensorsHeader({{"w", "F32", {2, 2}, bytes}}, {}).ok());
  EXPECT_FALSE(SafetensorsHeader({{"w", "F32", {2, 3}, bytes}, {"w", "F32", {2, 3}, bytes}}, {})
                   .ok());
  EXPECT_FALSE(ReadSafetensorsIndex(*h).ok());  // data missing
}

}  // namespace
}  // namespace skipswarm::model
