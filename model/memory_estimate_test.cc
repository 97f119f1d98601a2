#include "model/memory_estimate.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "model/presets.h"
#include "model/stage_module.h"

namespace skipswarm::model {
namespace {

int64_t RealParameterCount(const ModelConfig& config, int stage) {
  StageModule m(config, stage);
  int64_t n = 0;
  for (const at::Tensor& p : m.parameters()) n += p.numel();
  return n;
}

TEST(MemoryEstimateTest, ParameterCountsMatchTheBuiltStages) {
  for (const char* name : {"tiny", "small"}) {
    ModelConfig c = *ModelPreset(name);
    for (int s = 0; s < c.num_stages; ++s) {
      StageMemoryEstimate e = EstimateStageMemory(c, s, MemoryEstimateOptions{});
      EXPECT_EQ(e.parameters, RealParameterCount(c, s)) << name << " stage " << s;
      EXPECT_EQ(e.weight_bytes, 4 * e.parameters);
      EXPECT_EQ(e.optimizer_bytes, 8 * e.parameters);
    }
  }
  ModelConfig untied = *ModelPreset("tiny");
  untied.tie_embeddings = false;
  EXPECT_EQ(EstimateStageMemory(untied, 0, {}).parameters, RealParameterCount(untied, 0));
}

TEST(MemoryEstimateTest, PresetsHaveTheirNominalSizes) {
  EXPECT_NEAR(ModelPreset("small")->ParameterCount() / 1e6, 9.55, 0.1);
  EXPECT_NEAR(ModelPreset("125m")->ParameterCount() / 1e6, 85.1, 1);
  EXPECT_NEAR(ModelPreset("350m")->ParameterCount() / 1e6, 308.5, 2);
  EXPECT_NEAR(ModelPreset("1b")->ParameterCount() / 1e9, 1.23, 0.02);
  EXPECT_FALSE(ModelPreset("13b").ok());
}

TEST(MemoryEstimateTest, ActivationsScaleWithTheMicroBatchAndInFlightCount) {
  ModelConfig c = *ModelPreset("125m");
  MemoryEstimateOptions one;
  one.samples_per_mb = 1;
  MemoryEstimateOptions four = one;
  four.samples_per_mb = 4;
  four.in_flight_mbs = 2;
  StageMemoryEstimate a = EstimateStageMemory(c, 1, one);
  StageMemoryEstimate b = EstimateStageMemory(c, 1, four);
  EXPECT_EQ(b.activation_bytes_per_mb, 4 * a.activation_bytes_per_mb);
  EXPECT_EQ(b.total_bytes - a.total_bytes,
            8 * a.activation_bytes_per_mb - a.activation_bytes_per_mb +
                (b.backward_workspace_bytes - a.backward_workspace_bytes));
  // 2 blocks of 1024 tokens: (11 d + 4 f) floats and h t float probabilities
  // per token and block; one block's backward: 3 float h t per token.
  EXPECT_EQ(a.activation_bytes_per_mb, 1024 * 2 * ((11 * 768 + 4 * 2048) * 4 + 4 * 12 * 1024));
  EXPECT_EQ(a.backward_workspace_bytes, 1024 * 3 * 4 * 12 * 1024);
  EXPECT_EQ(a.autocast_weight_bytes, 0);
  MemoryEstimateOptions bf16 = one;
  bf16.bf16_activations = true;
  EXPECT_LT(EstimateStageMemory(c, 1, bf16).activation_bytes_per_mb, a.activation_bytes_per_mb);
}

TEST(MemoryEstimateTest, SlotsAndStagesFollowFreeMemory) {
  StageMemoryEstimate e;
  e.weight_bytes = 100;
  e.gradient_bytes = 100;
  e.optimizer_bytes = 200;  // 400 fixed per stage
  e.activation_bytes_per_mb = 50;
  // 1,000 free: two stages with one MB each; beside one stage 12 MBs, capped at 4.
  EXPECT_EQ(FitInMemory(e, 1000, 1, 4).stages, 2);
  EXPECT_EQ(FitInMemory(e, 1000, 1, 4).slots, 4);
  EXPECT_EQ(FitInMemory(e, 1000, 1, 100).slots, 12);
  // Beside two hosted stages: 200 left, 4 MBs; 499 free: none beside two.
  EXPECT_EQ(FitInMemory(e, 1000, 2, 100).slots, 4);
  EXPECT_EQ(FitInMemory(e, 499, 2, 4).slots, 0);
  EXPECT_EQ(FitInMemory(e, 449, 1, 4).slots, 0);
  EXPECT_EQ(FitInMemory(e, 449, 1, 4).stages, 0);
  EXPECT_EQ(FitInMemory(e, 450, 1, 4).slots, 1);
  // Unknown free memory: what was asked.
  EXPECT_EQ(FitInMemory(e, -1, 1, 4).slots, 4);
  EXPECT_EQ(FitInMemory(e, -1, 1, 4).stages, -1);
}

TEST(MemoryEstimateTest, ANodeThatCannotHoldAStageIsRefusedWithTheNumbers) {
  StageMemoryEstimate e = EstimateLargestStage(*ModelPreset("1b"), MemoryEstimateOptions{});
  absl::Status s = CheckStageFits(e, int64_t{1} << 30, "cuda:0");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("cuda:0"), std::string::npos) << s;
  EXPECT_NE(s.message().find("1073741824 bytes"), std::string::npos) << s;
  EXPECT_NE(s.message().find(std::to_string(e.total_bytes)), std::string::npos) << s;
  EXPECT_TRUE(CheckStageFits(e, e.total_bytes, "cuda:0").ok());
  EXPECT_TRUE(CheckStageFits(e, -1, "cuda:0").ok());  // unknown: no refusal
}

TEST(MemoryEstimateTest, WholeModelIsTheSumOfItsStages) {
  ModelConfig c = *ModelPreset("small");
  StageMemoryEstimate all = EstimateWholeModel(c, MemoryEstimateOptions{});
  EXPECT_EQ(all.parameters, c.ParameterCount());
  // One backward at a time: the stages' workspaces are not added up.
  int64_t total = 0, workspace = 0;
  for (int s = 0; s < c.num_stages; ++s) {
    const StageMemoryEstimate e = EstimateStageMemory(c, s, {});
    total += e.total_bytes - e.backward_workspace_bytes;
    workspace = std::max(workspace, e.backward_workspace_bytes);
  }
  EXPECT_EQ(all.total_bytes, total + workspace);
  EXPECT_EQ(DescribeStageMemory(all).rfind("all stages: 9.56 M params", 0), 0u)
      << DescribeStageMemory(all);
}

TEST(MemoryEstimateTest, FormatsBytes) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(3 * 1024 + 205), "3.2 KiB");
  EXPECT_EQ(FormatBytes(int64_t{3} << 29), "1.50 GiB");
}

// Peak device memory of `train-ref --device=cuda` on an H200 (nvidia-smi's
// used memory, sampled, less the CUDA context's 621 MiB; 8 sequences of
// 1024 per micro-batch, 2 micro-batches a step; tests/gpu/gpu-check.sh,
// model/README.md). The estimate stays within 10% of each.
TEST(MemoryEstimateTest, WholeModelEstimateIsWithinTenPercentOfMeasuredGpuPeaks) {
  struct Case {
    const char* preset;
    bool bf16;
    double measured_mib;
  };
  for (const Case& m : {Case{"125m", false, 13876}, Case{"125m", true, 14144},
                        Case{"350m", false, 36002}, Case{"350m", true, 37028}}) {
    MemoryEstimateOptions o;
    o.samples_per_mb = 8;
    o.bf16_activations = m.bf16;
    const double estimate_mib =
        EstimateWholeModel(*ModelPreset(m.preset), o).total_bytes / double(1 << 20);
    EXPECT_NEAR(estimate_mib / m.measured_mib, 1.0, 0.10)
        << m.preset << (m.bf16 ? " bf16" : " fp32") << ": estimate " << estimate_mib
        << " MiB, measured " << m.measured_mib << " MiB";
  }
}

}  // namespace
}  // namespace skipswarm::model
