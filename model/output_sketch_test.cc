#include "model/output_sketch.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "model/tensor_codec.h"

namespace skipswarm::model {
namespace {

// A residual-stream-like activation: Gaussian with a few large features
// (heavy tails make int8 blocks coarse, the hard case for the check).
at::Tensor Activation(uint64_t seed, std::vector<int64_t> shape = {4, 32, 64}) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  at::Tensor x = at::randn(shape, gen);
  x.select(-1, 3).mul_(8.0);
  return x.contiguous();
}

absl::Span<const float> Values(const at::Tensor& t) {
  return absl::Span<const float>(t.data_ptr<float>(), t.numel());
}

std::vector<int64_t> Shape(const at::Tensor& t) { return {t.sizes().begin(), t.sizes().end()}; }

OutputSketch Sketch(const at::Tensor& t, uint64_t seed) {
  return SketchOutput(Values(t), Shape(t), seed);
}

at::Tensor RoundTrip(const at::Tensor& t, const EncodeOptions& codec) {
  absl::StatusOr<EncodedTensor> enc = EncodeTensor(t, codec);
  EXPECT_TRUE(enc.ok()) << enc.status();
  DecodeExpectations want;
  absl::StatusOr<at::Tensor> dec = DecodeTensor(enc->meta, enc->payload, want);
  EXPECT_TRUE(dec.ok()) << dec.status();
  return dec->contiguous();
}

SketchVerdict Check(const at::Tensor& received, const EncodeOptions& codec,
                    const OutputSketch& sketch) {
  absl::StatusOr<SketchVerdict> v = CheckAgainstSketch(Values(received), Shape(received), codec,
                                                       sketch);
  EXPECT_TRUE(v.ok()) << v.status();
  return v.value_or(SketchVerdict{});
}

std::vector<EncodeOptions> AllCodecs() {
  return {{Codec::kRawFp32}, {Codec::kFp16}, {Codec::kBf16}, {Codec::kInt8Blockwise, 256},
          {Codec::kInt8Blockwise, 64}};
}

TEST(OutputSketchTest, IsDeterministicAndDependsOnTheSeed) {
  at::Tensor y = Activation(1);
  OutputSketch a = Sketch(y, 7), b = Sketch(y, 7), c = Sketch(y, 8);
  EXPECT_EQ(a.projections, b.projections);
  EXPECT_EQ(a.norm, b.norm);
  EXPECT_NE(a.projections, c.projections);
  EXPECT_EQ(a.projections.size(), static_cast<size_t>(kDefaultSketchProjections));
  EXPECT_NEAR(a.norm, y.norm().item<double>(), 1e-4 * a.norm);
  // A sign-weighted bucketing keeps the energy on average (Note [Output sketch]).
  double energy = 0;
  for (double p : a.projections) energy += p * p;
  EXPECT_NEAR(energy / (a.norm * a.norm), 1.0, 0.5);
}

TEST(OutputSketchTest, EqualTensorsMatchExactly) {
  at::Tensor y = Activation(2);
  SketchVerdict v = Check(y, {Codec::kRawFp32}, Sketch(y, 3));
  EXPECT_TRUE(v.match) << v.reason;
  EXPECT_EQ(v.norm_gap, 0);
  EXPECT_EQ(v.energy, 0);
}

TEST(OutputSketchTest, BoundHoldsForEveryCodecRoundTrip) {
  for (const EncodeOptions& codec : AllCodecs()) {
    for (uint64_t seed = 0; seed < 20; ++seed) {
      at::Tensor y = Activation(100 + seed);
      at::Tensor r = RoundTrip(y, codec);
      const double err = (r - y).norm().item<double>();
      EXPECT_LE(err, CodecErrorBound(Values(r), codec)) << CodecName(codec.codec);
    }
  }
  at::Tensor y = Activation(5);
  EXPECT_EQ(CodecErrorBound(Values(y), {Codec::kRawFp32}), 0);
}

// The false-positive side: the codec's rounding never fails the check
// (200 tensors x 5 codecs here; the replica test measures real activations).
TEST(OutputSketchTest, CodecRoundTripNoisePasses) {
  for (const EncodeOptions& codec : AllCodecs()) {
    double worst = 0;
    for (uint64_t seed = 0; seed < 200; ++seed) {
      at::Tensor y = Activation(1000 + seed);
      SketchVerdict v = Check(RoundTrip(y, codec), codec, Sketch(y, seed));
      EXPECT_TRUE(v.match) << CodecName(codec.codec) << " seed " << seed << ": " << v.reason;
      if (v.energy_limit > 0) worst = std::max(worst, v.energy / v.energy_limit);
    }
    // Honest energy stays well under the limit (Note [Output sketch]).
    EXPECT_LT(worst, 0.5) << CodecName(codec.codec);
  }
}

TEST(OutputSketchTest, ScaledOutputFailsWithEveryCodec) {
  for (const EncodeOptions& codec : AllCodecs()) {
    for (uint64_t seed = 0; seed < 50; ++seed) {
      at::Tensor y = Activation(2000 + seed);
      SketchVerdict v = Check(RoundTrip(y * 1.05, codec), codec, Sketch(y, seed));
      EXPECT_FALSE(v.match) << CodecName(codec.codec) << " seed " << seed;
    }
  }
}

TEST(OutputSketchTest, RandomOutputOfTheSameNormFails) {
  for (const EncodeOptions& codec : AllCodecs()) {
    for (uint64_t seed = 0; seed < 50; ++seed) {
      at::Tensor y = Activation(3000 + seed);
      at::Tensor lie = Activation(4000 + seed);
      lie = lie * (y.norm() / lie.norm());
      SketchVerdict v = Check(RoundTrip(lie, codec), codec, Sketch(y, seed));
      EXPECT_FALSE(v.match) << CodecName(codec.codec) << " seed " << seed;
      EXPECT_NE(v.reason.find("energy"), std::string::npos) << v.reason;
    }
  }
}

TEST(OutputSketchTest, PerturbedOutputFails) {
  for (const EncodeOptions& codec : AllCodecs()) {
    for (uint64_t seed = 0; seed < 50; ++seed) {
      at::Tensor y = Activation(5000 + seed);
      // One token's vector replaced (a sparse lie), then 5% noise everywhere.
      at::Tensor one = y.clone();
      one[1][7] = Activation(6000 + seed, {64});
      EXPECT_FALSE(Check(RoundTrip(one, codec), codec, Sketch(y, seed)).match)
          << CodecName(codec.codec) << " seed " << seed;
      at::Tensor noisy = y + 0.05 * y.std() * Activation(7000 + seed);
      EXPECT_FALSE(Check(RoundTrip(noisy, codec), codec, Sketch(y, seed)).match)
          << CodecName(codec.codec) << " seed " << seed;
    }
  }
}

// Why the seed must stay secret from the checked replica: knowing it, a liar
// moves two elements of one bucket (same sign) apart, which keeps the norm
// to first order and every projection exactly. A fresh seed catches it.
TEST(OutputSketchTest, NullSpaceLieNeedsTheSeed) {
  at::Tensor y = Activation(8);
  const uint64_t seed = 42;
  OutputSketch known = Sketch(y, seed);
  // Find two elements in one bucket with equal signs by sketching unit
  // vectors (the sketch is linear).
  const int64_t n = y.numel();
  std::vector<double> first(kDefaultSketchProjections, 0);
  std::vector<int64_t> owner(kDefaultSketchProjections, -1);
  int64_t a = -1, b = -1;
  for (int64_t i = 0; i < n && a < 0; ++i) {
    at::Tensor e = at::zeros({n});
    e[i] = 1;
    OutputSketch s = SketchOutput(Values(e), {n}, seed);
    for (int j = 0; j < kDefaultSketchProjections; ++j) {
      if (s.projections[j] == 0) continue;
      if (owner[j] >= 0 && first[j] == s.projections[j]) {
        a = owner[j];
        b = i;
      } else if (owner[j] < 0) {
        owner[j] = i;
        first[j] = s.projections[j];
      }
    }
  }
  ASSERT_GE(a, 0);
  at::Tensor lie = y.clone().view({-1});
  // Equal-and-opposite shift: projections unchanged; the shift keeps
  // y_a^2 + y_b^2 when set to d = y_b - y_a.
  const float d = lie[b].item<float>() - lie[a].item<float>();
  lie[a] += d;
  lie[b] -= d;
  lie = lie.view(y.sizes());
  ASSERT_GT((lie - y).norm().item<double>(), 0.1);
  EXPECT_TRUE(Check(lie, {Codec::kRawFp32}, known).match);
  EXPECT_FALSE(Check(lie, {Codec::kRawFp32}, Sketch(y, seed + 1)).match);
}

TEST(OutputSketchTest, ShapeMismatchAndNonFiniteOutputFail) {
  at::Tensor y = Activation(9);
  OutputSketch s = Sketch(y, 1);
  at::Tensor other = y.reshape({8, 16, 64}).contiguous();
  SketchVerdict v = Check(other, {Codec::kRawFp32}, s);
  EXPECT_FALSE(v.match);
  EXPECT_NE(v.reason.find("shape"), std::string::npos);
  at::Tensor bad = y.clone();
  bad[0][0][0] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(Check(bad, {Codec::kRawFp32}, s).match);
}

TEST(OutputSketchTest, MalformedSketchIsAnError) {
  at::Tensor y = Activation(10);
  const auto check = [&](const OutputSketch& s) {
    return CheckAgainstSketch(Values(y), Shape(y), {Codec::kRawFp32}, s).status().code();
  };
  OutputSketch s = Sketch(y, 1);
  OutputSketch empty = s;
  empty.projections.clear();
  EXPECT_EQ(check(empty), absl::StatusCode::kInvalidArgument);
  OutputSketch huge = s;
  huge.projections.assign(kMaxSketchProjections + 1, 0);
  EXPECT_EQ(check(huge), absl::StatusCode::kInvalidArgument);
  OutputSketch nan = s;
  nan.projections[3] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(check(nan), absl::StatusCode::kInvalidArgument);
  OutputSketch negative = s;
  negative.norm = -1;
  EXPECT_EQ(check(negative), absl::StatusCode::kInvalidArgument);
  OutputSketch shape = s;
  shape.shape = {0, 4};
  EXPECT_EQ(check(shape), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckAgainstSketch(Values(y), {3}, {Codec::kRawFp32}, s).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace skipswarm::model
