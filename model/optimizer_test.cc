#include "model/optimizer.h"

#include <gtest/gtest.h>

#include "model/checkpoint.h"
#include "model/local_pipeline.h"
#include "model/test_util.h"
#include "model/torch_compat.h"

namespace skipswarm::model {
namespace {

using testing::TinyConfig;
using testing::TinyTokens;

TEST(LearningRateTest, WarmsUpThenCosineToMin) {
  OptimizerOptions o;
  o.peak_lr = 1.0;
  o.min_lr = 0.1;
  o.warmup_steps = 10;
  o.total_steps = 110;
  EXPECT_NEAR(LearningRate(o, 0), 0.1, 1e-12);
  EXPECT_NEAR(LearningRate(o, 9), 1.0, 1e-12);
  EXPECT_NEAR(LearningRate(o, 10), 1.0, 1e-12);
  EXPECT_NEAR(LearningRate(o, 60), 0.55, 1e-12);
  EXPECT_NEAR(LearningRate(o, 110), 0.1, 1e-12);
  EXPECT_NEAR(LearningRate(o, 500), 0.1, 1e-12);
  for (int s = 11; s < 110; ++s) EXPECT_LE(LearningRate(o, s), LearningRate(o, s - 1));
}

TEST(StageOptimizerTest, ClipsToMaxNorm) {
  at::Tensor p = at::zeros({4}).requires_grad_(true);
  p.mutable_grad() = at::full({4}, 3.0);
  EXPECT_NEAR(ClipGradNorm({p}, 1.0), 6.0, 1e-9);
  EXPECT_NEAR(p.grad().norm().item<double>(), 1.0, 1e-5);
}

TEST(StageOptimizerTest, FlattenAndSetGradientsRoundTrip) {
  auto pipe = LocalPipeline::Create(TinyConfig()).value();
  ASSERT_TRUE(pipe->TrainMicroBatch(1, {0, 1, 2}, TinyTokens(1), TinyTokens(2)).ok());
  StageModule& m = pipe->stage(1).module();
  at::Tensor flat = FlattenGradients(m);
  pipe->ZeroGrad();
  ASSERT_TRUE(SetGradientsFromFlat(m, flat * 2).ok());
  EXPECT_TRUE(FlattenGradients(m).allclose(flat * 2));
  EXPECT_EQ(SetGradientsFromFlat(m, flat.slice(0, 1)).code(), absl::StatusCode::kInvalidArgument);
}

// Two parameter groups (with and without weight decay), as StageOptimizer
// makes them, of `shapes`; the same values on every call.
std::unique_ptr<torch::optim::AdamW> MakeAdamW(std::vector<at::Tensor>* params) {
  at::manual_seed(7);
  const std::vector<std::vector<int64_t>> shapes = {{16, 8}, {8}, {3, 5, 2}, {5}, {64, 4}};
  std::vector<at::Tensor> decay, no_decay;
  for (const auto& shape : shapes) {
    at::Tensor p = at::randn(shape).requires_grad_(true);
    params->push_back(p);
    (p.dim() >= 2 ? decay : no_decay).push_back(p);
  }
  auto options = [](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(3e-3).betas({0.9, 0.95}).eps(1e-8).weight_decay(wd));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, options(0.1));
  groups.emplace_back(no_decay, options(0.0));
  return std::make_unique<torch::optim::AdamW>(groups, torch::optim::AdamWOptions(3e-3));
}

// Note [Foreach AdamW]: the list step equals libtorch's AdamW::step on the
// same gradients, parameters and moments alike, over steps where one
// parameter misses a gradient (its step count falls behind, so the list
// step splits the group by step number) and the learning rate changes.
TEST(StageOptimizerTest, ForeachAdamWStepEqualsLibtorchsAdamW) {
  std::vector<at::Tensor> want_params, got_params;
  auto want = MakeAdamW(&want_params);
  auto got = MakeAdamW(&got_params);
  at::manual_seed(11);
  for (int step = 0; step < 6; ++step) {
    for (size_t i = 0; i < want_params.size(); ++i) {
      if (step == 2 && i == 3) {  // no gradient this step
        want_params[i].mutable_grad() = at::Tensor();
        got_params[i].mutable_grad() = at::Tensor();
        continue;
      }
      at::Tensor g = at::randn(want_params[i].sizes());
      want_params[i].mutable_grad() = g.clone();
      got_params[i].mutable_grad() = g.clone();
    }
    const double lr = 3e-3 * (1.0 + 0.5 * step);
    for (auto& group : want->param_groups()) group.options().set_lr(lr);
    for (auto& group : got->param_groups()) group.options().set_lr(lr);
    want->step();
    ASSERT_TRUE(ForeachAdamWStep(*got).ok());
    for (size_t i = 0; i < want_params.size(); ++i) {
      const double diff = (want_params[i] - got_params[i]).abs().max().item<double>();
      EXPECT_LE(diff, 1e-6) << "parameter " << i << " step " << step;
      // On the CPU the list ops run the per-tensor kernels: the same bytes.
      EXPECT_TRUE(at::equal(want_params[i], got_params[i])) << "parameter " << i << " step " << step;
    }
  }
  // The moments and step counts live where AdamW keeps them (checkpoints).
  ASSERT_EQ(want->state().size(), got->state().size());
  for (size_t i = 0; i < want_params.size(); ++i) {
    const auto& w = static_cast<const torch::optim::AdamWParamState&>(
        *want->state().at(compat::OptimizerStateKey(want_params[i])));
    const auto& g = static_cast<const torch::optim::AdamWParamState&>(
        *got->state().at(compat::OptimizerStateKey(got_params[i])));
    EXPECT_EQ(w.step(), g.step()) << i;
    EXPECT_EQ(g.step(), i == 3 ? 5 : 6) << i;
    EXPECT_TRUE(at::equal(w.exp_avg(), g.exp_avg())) << i;
    EXPECT_TRUE(at::equal(w.exp_avg_sq(), g.exp_avg_sq())) << i;
  }
}

TEST(StageOptimizerTest, ForeachAdamWStepRefusesAmsgrad) {
  at::Tensor p = at::ones({2}).requires_grad_(true);
  p.mutable_grad() = at::ones({2});
  torch::optim::AdamW adamw({p}, torch::optim::AdamWOptions(1e-3).amsgrad(true));
  EXPECT_EQ(ForeachAdamWStep(adamw).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(at::equal(p, at::ones({2})));
}

// Two replicas that each saw one MB, averaged by visit count, end up
// bit-identical to one replica that saw both.
TEST(StageOptimizerTest, ReplicaAveragingByVisitsMatchesOneReplica) {
  auto a = LocalPipeline::Create(TinyConfig()).value();
  auto b = LocalPipeline::Create(TinyConfig()).value();
  auto both = LocalPipeline::Create(TinyConfig()).value();
  ASSERT_TRUE(a->TrainMicroBatch(1, {0, 1, 2}, TinyTokens(1), TinyTokens(2)).ok());
  ASSERT_TRUE(b->TrainMicroBatch(2, {0, 1}, TinyTokens(3), TinyTokens(4)).ok());
  ASSERT_TRUE(both->TrainMicroBatch(1, {0, 1, 2}, TinyTokens(1), TinyTokens(2)).ok());
  ASSERT_TRUE(both->TrainMicroBatch(2, {0, 1}, TinyTokens(3), TinyTokens(4)).ok());
  for (int s = 0; s < 3; ++s) {
    StageModule& ma = a->stage(s).module();
    StageModule& mb = b->stage(s).module();
    at::Tensor sum = FlattenGradients(ma) + FlattenGradients(mb);
    const double visits = a->stage(s).visits() + b->stage(s).visits();
    EXPECT_EQ(visits, both->stage(s).visits());
    ASSERT_TRUE(SetGradientsFromFlat(ma, sum).ok());
    ASSERT_TRUE(SetGradientsFromFlat(mb, sum).ok());
    StageOptimizer oa(ma, {}), ob(mb, {}), ox(both->stage(s).module(), {});
    ASSERT_TRUE(oa.Step(0, visits).ok());
    ASSERT_TRUE(ob.Step(0, visits).ok());
    absl::StatusOr<StepStats> sx = ox.Step(0, both->stage(s).visits());
    ASSERT_TRUE(sx.ok());
    EXPECT_TRUE(sx->stepped);
    EXPECT_EQ(ParameterDigest(ma), ParameterDigest(mb));
    at::Tensor pa = at::cat({ma.parameters()[0].reshape(-1)});
    at::Tensor px = at::cat({both->stage(s).module().parameters()[0].reshape(-1)});
    EXPECT_TRUE(pa.allclose(px, 1e-6, 1e-7)) << "stage " << s;
  }
}

TEST(StageOptimizerTest, UnvisitedStageDoesNotStep) {
  auto pipe = LocalPipeline::Create(TinyConfig()).value();
  std::string before = ParameterDigest(pipe->stage(2).module());
  ASSERT_TRUE(pipe->TrainMicroBatch(1, {0, 1}, TinyTokens(1), TinyTokens(2)).ok());
  StageOptimizer opt(pipe->stage(2).module(), {});
  absl::StatusOr<StepStats> s = opt.Step(0, pipe->stage(2).visits());
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->stepped);
  EXPECT_EQ(ParameterDigest(pipe->stage(2).module()), before);
}

TEST(StageOptimizerTest, LossFallsOnARepeatedBatch) {
  auto pipe = LocalPipeline::Create(TinyConfig()).value();
  std::vector<std::unique_ptr<StageOptimizer>> opts;
  OptimizerOptions o;
  o.peak_lr = 1e-2;
  o.warmup_steps = 0;
  for (int s = 0; s < 3; ++s) opts.push_back(std::make_unique<StageOptimizer>(pipe->stage(s).module(), o));
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    absl::StatusOr<double> loss = pipe->TrainMicroBatch(step, {0, 1, 2}, TinyTokens(1), TinyTokens(2));
    ASSERT_TRUE(loss.ok());
    if (step == 0) first = *loss;
    last = *loss;
    for (int s = 0; s < 3; ++s) {
      ASSERT_TRUE(opts[s]->Step(step, pipe->stage(s).visits()).ok());
      pipe->stage(s).ZeroGrad();
    }
  }
  EXPECT_LT(last, first * 0.7);
}

}  // namespace
}  // namespace skipswarm::model
