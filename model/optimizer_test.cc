#include "model/optimizer.h"

#include <gtest/gtest.h>

#include "model/checkpoint.h"
#include "model/local_pipeline.h"
#include "model/test_util.h"

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
