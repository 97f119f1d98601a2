#include "model/avg_codec.h"

#include <gtest/gtest.h>

#include <cmath>

#include "model/averaging_options.h"

namespace skipswarm::model {
namespace {

at::Tensor Vector(int64_t n, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  return at::randn({n}, gen, at::kFloat);
}

TEST(AveragingCodecTest, Fp32IsExact) {
  AveragingCodec codec(*ParseAvgCodec("fp32"), 1000, 1);
  at::Tensor v = Vector(1000, 3);
  absl::StatusOr<AveragingCodec::Result> r = codec.Compress(v);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(at::equal(r->decoded, v));
  EXPECT_EQ(r->bytes, 4000);
}

TEST(AveragingCodecTest, WireCodecsRoundTripWithTheirSizes) {
  const int64_t n = 4096;
  at::Tensor v = Vector(n, 5);
  AveragingCodec bf16(*ParseAvgCodec("bf16"), n, 1);
  AveragingCodec int8(*ParseAvgCodec("int8"), n, 1);
  absl::StatusOr<AveragingCodec::Result> b = bf16.Compress(v);
  absl::StatusOr<AveragingCodec::Result> i = int8.Compress(v);
  ASSERT_TRUE(b.ok() && i.ok());
  EXPECT_EQ(b->bytes, 2 * n);
  EXPECT_EQ(i->bytes, n + 4 * n / 256);
  EXPECT_LT((b->decoded - v).norm().item<double>() / v.norm().item<double>(), 0.01);
  EXPECT_LT((i->decoded - v).norm().item<double>() / v.norm().item<double>(), 0.02);
  // Compression ratio vs fp32.
  EXPECT_NEAR(4.0 * n / i->bytes, 3.94, 0.01);
  // Note [Error feedback]: what int8 rounded away comes back next time.
  EXPECT_TRUE(at::allclose(int8.residual(), v - i->decoded));
  at::Tensor tiny = at::full({n}, 1e-4f, at::kFloat);
  tiny[0] = 1.0f;  // its block's absmax: 1e-4 rounds to 0 in that block
  AveragingCodec ef(*ParseAvgCodec("int8"), n, 1);
  at::Tensor sent = at::zeros({n}, at::kFloat);
  for (int k = 0; k < 100; ++k) sent += ef.Compress(tiny)->decoded;
  EXPECT_EQ(sent[0].item<float>(), 100.0f);
  EXPECT_NEAR(sent[1].item<float>(), 100 * 1e-4, 0.5 / 127);  // not 0
}

// Note [Thinned uploads]: keep 0.25 sends the quarter of the int8 blocks
// with the largest norm, the rest decode to zeros and wait in the residual,
// so over rounds every block goes out and the sum sent tracks the inputs.
TEST(AveragingCodecTest, ThinnedInt8SendsTheLargestBlocksAndKeepsTheRest) {
  const int64_t n = 16 * 256;
  AveragingCodec codec(*ParseAvgCodec("int8"), n, 1);
  at::Tensor v = Vector(n, 11);
  // Blocks 3 and 9 are the largest.
  v.slice(0, 3 * 256, 4 * 256).mul_(10);
  v.slice(0, 9 * 256, 10 * 256).mul_(5);
  absl::StatusOr<AveragingCodec::Result> r = codec.Compress(v, 0.125);
  ASSERT_TRUE(r.ok()) << r.status();
  at::Tensor blocks = r->decoded.view({16, 256}).ne(0).any(1);
  EXPECT_EQ(blocks.sum().item<int64_t>(), 2);
  EXPECT_TRUE(blocks[3].item<bool>());
  EXPECT_TRUE(blocks[9].item<bool>());
  // What the shard codec sends: 2 blocks of values and scales, their
  // indices and a count; a whole int8 vector is n + 4 * 16.
  EXPECT_EQ(r->bytes, n + 4 * 16 - 14 * (256 + 4) + 4 * 2 + 4);
  EXPECT_TRUE(at::allclose(codec.residual(), v - r->decoded));
  // Unthinned rounds afterwards send what was held back.
  at::Tensor sent = r->decoded.clone();
  at::Tensor zero = at::zeros({n}, at::kFloat);
  for (int k = 0; k < 3; ++k) sent += codec.Compress(zero)->decoded;
  EXPECT_LT((sent - v).norm().item<double>() / v.norm().item<double>(), 0.01);
  // keep 1 (and out of range) is the plain codec.
  AveragingCodec plain(*ParseAvgCodec("int8"), n, 1), one(*ParseAvgCodec("int8"), n, 1);
  EXPECT_TRUE(at::equal(plain.Compress(v)->decoded, one.Compress(v, 1.0)->decoded));
  AveragingCodec fresh(*ParseAvgCodec("int8"), n, 1), nan_keep(*ParseAvgCodec("int8"), n, 1),
      negative(*ParseAvgCodec("int8"), n, 1);
  const at::Tensor want = fresh.Compress(v)->decoded;
  EXPECT_TRUE(at::equal(want, nan_keep.Compress(v, std::nan(""))->decoded));
  EXPECT_TRUE(at::equal(want, negative.Compress(v, -3)->decoded));
  // Other codecs ignore it.
  AveragingCodec bf(*ParseAvgCodec("bf16"), n, 1), bf_thin(*ParseAvgCodec("bf16"), n, 1);
  EXPECT_TRUE(at::equal(bf.Compress(v)->decoded, bf_thin.Compress(v, 0.125)->decoded));
}

TEST(AveragingCodecTest, TopKKeepsTheLargestAndMeasuresItsRatio) {
  const int64_t n = 10000;
  AveragingCodec codec(*ParseAvgCodec("topk:0.01"), n, 1);
  at::Tensor v = Vector(n, 7);
  absl::StatusOr<AveragingCodec::Result> r = codec.Compress(v);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->decoded.ne(0).sum().item<int64_t>(), 100);
  EXPECT_EQ(r->bytes, 800);                   // index + value per kept element
  EXPECT_DOUBLE_EQ(4.0 * n / r->bytes, 50.0);  // 50x fewer bytes than fp32
  // The kept ones are the largest magnitudes.
  const double smallest_kept = r->decoded.abs().masked_select(r->decoded.ne(0)).min().item<double>();
  const double largest_dropped = v.abs().masked_select(r->decoded.eq(0)).max().item<double>();
  EXPECT_GE(smallest_kept, largest_dropped);
}

// Note [Error feedback]: what top-k drops now is sent later; after many
// calls the sum sent equals the sum of the inputs minus the residual.
TEST(AveragingCodecTest, ErrorFeedbackResendsTheAccumulatedResidual) {
  const int64_t n = 1000;
  AveragingCodec codec(*ParseAvgCodec("topk:0.01"), n, 1);
  at::Tensor first = Vector(n, 11);
  absl::StatusOr<AveragingCodec::Result> r1 = codec.Compress(first);
  ASSERT_TRUE(r1.ok());
  EXPECT_TRUE(at::allclose(codec.residual(), first - r1->decoded));
  // A zero input: what goes out is purely the residual's largest entries.
  absl::StatusOr<AveragingCodec::Result> r2 = codec.Compress(at::zeros({n}, at::kFloat));
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->decoded.ne(0).sum().item<int64_t>(), 10);
  EXPECT_TRUE(at::allclose(r2->decoded.masked_select(r2->decoded.ne(0)),
                           (first - r1->decoded).masked_select(r2->decoded.ne(0))));
  // Keep sending the same vector: the running sum tracks the inputs'.
  at::Tensor v = Vector(n, 13);
  at::Tensor sent = r1->decoded + r2->decoded;
  at::Tensor input = first.clone();
  for (int i = 0; i < 2000; ++i) {
    absl::StatusOr<AveragingCodec::Result> r = codec.Compress(v);
    ASSERT_TRUE(r.ok());
    sent += r->decoded;
    input += v;
  }
  EXPECT_TRUE(at::allclose(sent + codec.residual(), input, 1e-3, 1e-3));
  // The residual stays bounded (each coordinate waits at most ~1/F calls),
  // so the running sum's relative error shrinks as it grows.
  EXPECT_LT((sent - input).norm().item<double>() / input.norm().item<double>(), 0.05);
}

TEST(AveragingCodecTest, PowerSgdIsLowRankWithErrorFeedback) {
  const int64_t n = 64 * 64;
  AveragingCodec codec(*ParseAvgCodec("powersgd:2"), n, 1);
  // An exactly rank-1 matrix is recovered after one power iteration.
  at::Generator gen = at::detail::createCPUGenerator(3);
  at::Tensor u = at::randn({64, 1}, gen, at::kFloat), w = at::randn({1, 64}, gen, at::kFloat);
  at::Tensor v = at::matmul(u, w).reshape({-1});
  absl::StatusOr<AveragingCodec::Result> r = codec.Compress(v);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->bytes, 4 * 2 * (64 + 64));
  EXPECT_LT((r->decoded - v).norm().item<double>() / v.norm().item<double>(), 1e-4);
  EXPECT_TRUE(at::allclose(codec.residual(), v - r->decoded));
}

TEST(AveragingCodecTest, RefusesWrongSizesAndNonFinite) {
  AveragingCodec codec(*ParseAvgCodec("topk:0.5"), 10, 1);
  EXPECT_FALSE(codec.Compress(at::zeros({9}, at::kFloat)).ok());
  at::Tensor bad = at::zeros({10}, at::kFloat);
  bad[3] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(codec.Compress(bad).ok());
  EXPECT_EQ(codec.residual().abs().sum().item<double>(), 0);
}

}  // namespace
}  // namespace skipswarm::model
