#include "model/stage_executor.h"

#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <string>

#include "model/local_pipeline.h"
#include "model/route.h"
#include "model/test_util.h"

namespace skipswarm::model {
namespace {

using ::skipswarm::model::testing::TinyConfig;

ModelConfig Tiny(bool tied = true) { return TinyConfig(tied); }
at::Tensor Tokens(int64_t seed) { return testing::TinyTokens(static_cast<uint64_t>(seed)); }

using Grads = std::map<std::string, at::Tensor>;

Grads CollectGrads(LocalPipeline& pipe) {
  Grads g;
  for (int s = 0; s < pipe.num_stages(); ++s) {
    for (auto& item : pipe.stage(s).module().named_parameters()) {
      at::Tensor grad = item.value().grad();
      g[std::to_string(s) + "/" + item.key()] =
          grad.defined() ? grad.clone() : at::zeros_like(item.value());
    }
  }
  return g;
}

std::vector<StageModule*> Modules(LocalPipeline& pipe) {
  std::vector<StageModule*> m;
  for (int s = 0; s < pipe.num_stages(); ++s) m.push_back(&pipe.stage(s).module());
  return m;
}

double MaxDiff(const Grads& a, const Grads& b) {
  double worst = 0;
  for (auto& [k, v] : a) worst = std::max(worst, (v - b.at(k)).abs().max().item<double>());
  return worst;
}

// Staged (hop by hop, detached between stages) vs one autograd graph.
void ExpectStagedEqualsMonolithic(const ModelConfig& config, const std::vector<int>& route) {
  auto pipe = LocalPipeline::Create(config).value();
  at::Tensor tokens = Tokens(1), targets = Tokens(2);
  absl::StatusOr<double> loss = pipe->TrainMicroBatch(7, route, tokens, targets);
  ASSERT_TRUE(loss.ok()) << loss.status();
  Grads staged = CollectGrads(*pipe);
  pipe->ZeroGrad();
  at::Tensor mono = MonolithicLoss(Modules(*pipe), route, tokens, targets);
  mono.backward();
  Grads whole = CollectGrads(*pipe);
  const double loss_diff = std::abs(*loss - mono.item<double>());
  const double grad_diff = MaxDiff(staged, whole);
  std::cout << "route size " << route.size() << ": |loss diff| " << loss_diff
            << ", max |grad diff| " << grad_diff << "\n";
  EXPECT_LE(loss_diff, 1e-5);
  EXPECT_LE(grad_diff, 1e-5);
  for (int s = 0; s < pipe->num_stages(); ++s) EXPECT_EQ(pipe->stage(s).pending(), 0u);
}

TEST(StageExecutorTest, FullRouteEqualsMonolithic) {
  ExpectStagedEqualsMonolithic(Tiny(), FullRoute(3));
  ExpectStagedEqualsMonolithic(Tiny(/*tied=*/false), FullRoute(3));
}

TEST(StageExecutorTest, SwapRouteEqualsMonolithicInThatOrder) {
  ExpectStagedEqualsMonolithic(Tiny(), {0, 2, 1});
}

TEST(StageExecutorTest, SkipRouteEqualsModelWithThoseBlocksRemoved) {
  ModelConfig config = Tiny();
  auto pipe = LocalPipeline::Create(config).value();
  at::Tensor tokens = Tokens(3), targets = Tokens(4);
  absl::StatusOr<double> loss = pipe->TrainMicroBatch(1, {0, 2}, tokens, targets);
  ASSERT_TRUE(loss.ok()) << loss.status();
  // Skipped stage 1 got no gradient and no visit.
  for (auto& p : pipe->stage(1).module().parameters()) EXPECT_FALSE(p.grad().defined());
  EXPECT_EQ(pipe->stage(1).visits(), 0);
  EXPECT_EQ(pipe->stage(2).visits(), 1);
  Grads staged = CollectGrads(*pipe);
  pipe->ZeroGrad();

  // The same model written out by hand without stage 1's blocks (2 and 3).
  StageModule& s0 = pipe->stage(0).module();
  RotaryTable rope = MakeRotaryTable(config);
  at::Tensor x = s0.Embed(tokens);
  for (auto* stage : {&s0, &pipe->stage(2).module()}) {
    for (auto& block : stage->blocks()) {
      ASSERT_NE(block->global_index(), 2);
      ASSERT_NE(block->global_index(), 3);
      x = block->Forward(x, rope);
    }
  }
  at::Tensor ref = s0.Loss(x, targets);
  ref.backward();
  const double grad_diff = MaxDiff(staged, CollectGrads(*pipe));
  std::cout << "skip route: |loss diff| " << std::abs(*loss - ref.item<double>())
            << ", max |grad diff| " << grad_diff << "\n";
  EXPECT_LE(std::abs(*loss - ref.item<double>()), 1e-5);
  EXPECT_LE(grad_diff, 1e-5);
}

TEST(StageExecutorTest, StageBuiltAloneHoldsOnlyItsParameters) {
  ModelConfig config = Tiny(/*tied=*/false);
  for (int s = 0; s < 3; ++s) {
    auto exec = StageExecutor::Create(config, s).value();
    int64_t n = 0;
    for (auto& p : exec->module().parameters()) n += p.numel();
    EXPECT_EQ(n, config.StageParameterCount(s)) << "stage " << s;
  }
}

TEST(StageExecutorTest, SameWeightsWhicheverProcessBuildsTheStage) {
  auto a = StageExecutor::Create(Tiny(), 2).value();
  auto b = StageExecutor::Create(Tiny(), 2).value();
  auto pa = a->module().parameters(), pb = b->module().parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(pa[i].equal(pb[i]));
}

TEST(StageExecutorTest, RejectsBadInputsWithStatus) {
  ModelConfig config = Tiny();
  auto s0 = StageExecutor::Create(config, 0).value();
  auto s1 = StageExecutor::Create(config, 1).value();
  EXPECT_EQ(s0->Start(1, at::zeros({2, 8}, at::kFloat)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s0->Start(1, at::full({2, 8}, 32, at::kLong)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s0->Start(1, at::zeros({2, 9}, at::kLong)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s1->Forward(1, at::zeros({2, 8, 15})).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s1->Forward(1, at::zeros({2, 8, 16}, at::kLong)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s1->Forward(1, at::Tensor()).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s1->Start(1, at::zeros({2, 8}, at::kLong)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s1->Backward(5, at::zeros({2, 8, 16})).status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_TRUE(s1->Forward(5, at::zeros({2, 8, 16})).ok());
  EXPECT_EQ(s1->Forward(5, at::zeros({2, 8, 16})).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s1->Backward(5, at::zeros({2, 7, 16})).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s1->pending(), 1u);
  EXPECT_TRUE(s1->Discard(5));
  EXPECT_EQ(s1->pending(), 0u);
  EXPECT_EQ(s0->Tail(at::zeros({2, 8, 16}), at::zeros({2, 7}, at::kLong)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(StageExecutor::Create(config, 3).status().code(),
            absl::StatusCode::kInvalidArgument);
  RuntimeOptions gpu;
  gpu.device = "cuda";
  if (!at::hasCUDA()) {
    EXPECT_EQ(StageExecutor::Create(config, 0, gpu).status().code(),
              absl::StatusCode::kUnavailable);
  }
}

TEST(StageExecutorTest, EvalModeKeepsNothing) {
  auto pipe = LocalPipeline::Create(Tiny()).value();
  at::Tensor tokens = Tokens(5), targets = Tokens(6);
  absl::StatusOr<double> eval = pipe->EvalMicroBatch({0, 1, 2}, tokens, targets);
  ASSERT_TRUE(eval.ok()) << eval.status();
  for (int s = 0; s < 3; ++s) EXPECT_EQ(pipe->stage(s).pending(), 0u);
  absl::StatusOr<double> train = pipe->TrainMicroBatch(1, {0, 1, 2}, tokens, targets);
  ASSERT_TRUE(train.ok());
  EXPECT_NEAR(*eval, *train, 1e-6);
  EXPECT_FALSE(pipe->EvalMicroBatch({0, 3}, tokens, targets).ok());
}

TEST(StageExecutorTest, Bf16AutocastRunsAndStaysClose) {
  RuntimeOptions bf16;
  bf16.bf16_autocast = true;
  auto fp = LocalPipeline::Create(Tiny()).value();
  auto half = LocalPipeline::Create(Tiny(), bf16).value();
  at::Tensor tokens = Tokens(8), targets = Tokens(9);
  absl::StatusOr<double> a = fp->TrainMicroBatch(1, {0, 1, 2}, tokens, targets);
  absl::StatusOr<double> b = half->TrainMicroBatch(1, {0, 1, 2}, tokens, targets);
  ASSERT_TRUE(a.ok() && b.ok()) << b.status();
  EXPECT_NEAR(*a, *b, 0.05);
}

}  // namespace
}  // namespace skipswarm::model
