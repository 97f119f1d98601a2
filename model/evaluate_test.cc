#include "model/evaluate.h"

#include <gtest/gtest.h>

#include <c10/core/GradMode.h>

#include "model/route.h"
#include "model/test_util.h"

namespace skipswarm::model {
namespace {

ModelConfig SixStages() {
  ModelConfig c = testing::TinyConfig();
  c.num_stages = 6;  // one block per stage
  return c;
}

TEST(EvaluateTest, DepthCalibrationScalesOnlyRoutesDeeperThanTraining) {
  // Skip 0.33 of 6 stages: training routes visit 3 of the 5 non-zero stages.
  EXPECT_DOUBLE_EQ(DepthCalibrationScale(6, 0.33, FullRoute(6)), 3.0 / 5);
  EXPECT_DOUBLE_EQ(DepthCalibrationScale(6, 0.33, {0, 1, 2, 4, 5}), 3.0 / 4);
  EXPECT_DOUBLE_EQ(DepthCalibrationScale(6, 0.33, {0, 1, 3, 5}), 1.0);
  EXPECT_DOUBLE_EQ(DepthCalibrationScale(6, 0.33, {0, 2, 4}), 1.0);  // removal: not amplified
  EXPECT_DOUBLE_EQ(DepthCalibrationScale(6, 0.33, {0}), 1.0);
  EXPECT_DOUBLE_EQ(DepthCalibrationScale(6, 0.5, FullRoute(6)), 2.0 / 5);
  // Trained without skipping: always the plain model.
  EXPECT_DOUBLE_EQ(DepthCalibrationScale(6, 0.0, FullRoute(6)), 1.0);
  EXPECT_DOUBLE_EQ(DepthCalibrationScale(6, 0.0, {0, 3}), 1.0);
}

// The calibrated model is the monolithic model with every non-zero stage's
// residual update F(x) - x scaled; stage 0's blocks and head are unscaled.
TEST(EvaluateTest, ScaledEvaluationEqualsMonolithicScaledModel) {
  auto pipe = LocalPipeline::Create(SixStages()).value();
  at::Tensor tokens = testing::TinyTokens(3), targets = testing::TinyTokens(4);
  const std::vector<int> route = {0, 1, 2, 4, 5};
  for (double a : {1.0, 0.6}) {
    double expected;
    {
      c10::NoGradGuard no_grad;
      StageModule& s0 = pipe->stage(0).module();
      at::Tensor x = s0.RunBlocks(s0.Embed(tokens));
      for (size_t i = 1; i < route.size(); ++i) {
        at::Tensor y = pipe->stage(route[i]).module().RunBlocks(x);
        x = x + a * (y - x);
      }
      expected = s0.Loss(x, targets).item<double>();
    }
    absl::StatusOr<double> got = pipe->EvalMicroBatch(route, tokens, targets, a);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_NEAR(*got, expected, 1e-6) << "scale " << a;
  }
  // The scale changes the loss, and EvaluateRoute applies the calibration
  // for the training skip ratio (3 of 5 trained, 4 visited: 0.75).
  const double plain = pipe->EvalMicroBatch(route, tokens, targets).value();
  const double scaled = pipe->EvalMicroBatch(route, tokens, targets, 0.75).value();
  EXPECT_GT(std::abs(plain - scaled), 1e-4);
  std::vector<MicroBatch> batches = {{tokens, targets}};
  EXPECT_NEAR(EvaluateRoute(*pipe, route, batches, 1.0, 0.33).value().loss, scaled, 1e-9);
  EXPECT_NEAR(EvaluateRoute(*pipe, route, batches).value().loss, plain, 1e-9);
  EXPECT_NEAR(EvaluateRoute(*pipe, {0, 1, 3, 5}, batches, 1.0, 0.33).value().loss,
              pipe->EvalMicroBatch({0, 1, 3, 5}, tokens, targets).value(), 1e-9);
}

}  // namespace
}  // namespace skipswarm::model
