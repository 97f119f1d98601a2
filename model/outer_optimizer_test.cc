#include "model/outer_optimizer.h"

#include <gtest/gtest.h>

namespace skipswarm::model {
namespace {

at::Tensor T(std::vector<float> v) { return at::tensor(v, at::kFloat); }

TEST(OuterOptimizerTest, LrOneNoMomentumIsParameterAveraging) {
  AveragingOptions o;
  o.outer_lr = 1.0;
  o.outer_momentum = 0.0;
  OuterOptimizer outer(o, T({1, 2, 3}));
  // Two replicas moved to a and b; the mean pseudo-gradient gives their mean.
  at::Tensor a = T({0, 2, 5}), b = T({2, 4, 1});
  at::Tensor mean = (outer.PseudoGradient(a) + outer.PseudoGradient(b)) / 2;
  absl::StatusOr<at::Tensor> p = outer.Step(mean);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(at::allclose(*p, (a + b) / 2));
  EXPECT_TRUE(at::equal(outer.anchor(), *p));
  EXPECT_EQ(outer.syncs(), 1);
}

TEST(OuterOptimizerTest, NesterovMomentumMatchesTheFormula) {
  AveragingOptions o;
  o.outer_lr = 0.5;
  o.outer_momentum = 0.9;
  OuterOptimizer outer(o, T({10}));
  // g = 1: m = 1, update = 1 + 0.9 = 1.9, anchor = 10 - 0.95.
  absl::StatusOr<at::Tensor> p1 = outer.Step(T({1}));
  ASSERT_TRUE(p1.ok());
  EXPECT_NEAR((*p1)[0].item<float>(), 9.05, 1e-6);
  // g = 1 again: m = 1.9, update = 1 + 1.71 = 2.71, anchor -= 1.355.
  absl::StatusOr<at::Tensor> p2 = outer.Step(T({1}));
  ASSERT_TRUE(p2.ok());
  EXPECT_NEAR((*p2)[0].item<float>(), 9.05 - 1.355, 1e-5);
  EXPECT_NEAR(outer.momentum()[0].item<float>(), 1.9, 1e-6);
}

TEST(OuterOptimizerTest, RefusesNonFiniteAndWrongSize) {
  AveragingOptions o;
  OuterOptimizer outer(o, T({1, 2}));
  EXPECT_FALSE(outer.Step(T({1})).ok());
  EXPECT_FALSE(outer.Step(T({1, std::numeric_limits<float>::quiet_NaN()})).ok());
  EXPECT_TRUE(at::equal(outer.anchor(), T({1, 2})));
  EXPECT_EQ(outer.syncs(), 0);
}

// Note [Averaging state]: a joiner that restores the bytes continues
// exactly as its source: same anchor, momentum, residual, digest.
TEST(OuterOptimizerTest, AveragingStateRoundTripsAndIsChecked) {
  AveragingOptions o;
  o.codec = *ParseAvgCodec("topk:0.5");
  OuterOptimizer source(o, T({1, 2, 3, 4}));
  AveragingCodec source_codec(o.codec, 4, 1);
  ASSERT_TRUE(source.Step(T({0.5, -1, 0, 2})).ok());
  ASSERT_TRUE(source_codec.Compress(T({1, -3, 0.5, 2})).ok());
  const std::string bytes = SerializeAveragingState(&source, &source_codec);

  OuterOptimizer joiner(o, T({0, 0, 0, 0}));
  AveragingCodec joiner_codec(o.codec, 4, 1);
  ASSERT_TRUE(RestoreAveragingState(bytes, &joiner, &joiner_codec).ok());
  EXPECT_TRUE(at::equal(joiner.anchor(), source.anchor()));
  EXPECT_TRUE(at::equal(joiner.momentum(), source.momentum()));
  EXPECT_TRUE(at::equal(joiner_codec.residual(), source_codec.residual()));
  EXPECT_EQ(joiner.AnchorDigest(), source.AnchorDigest());

  std::string corrupt = bytes;
  corrupt[30] ^= 1;
  EXPECT_EQ(RestoreAveragingState(corrupt, &joiner, &joiner_codec).code(),
            absl::StatusCode::kDataLoss);
  OuterOptimizer other(o, T({0, 0, 0}));
  EXPECT_FALSE(RestoreAveragingState(bytes, &other, nullptr).ok());
  EXPECT_FALSE(RestoreAveragingState("short", &joiner, nullptr).ok());
}

}  // namespace
}  // namespace skipswarm::model
