// Verified compute in process (Note [Output sketch], Note [Verify-only
// forward]): two replicas X and Y of stage 1 with equal weights; stage 0
// makes real activations; Y sketches the forward X runs, and the check
// compares X's output as it would arrive at the hop after. Honest X is
// never flagged; a lying X (scaled or random activations) is, with every
// wire codec. Prints the figures tests/adversarial/README.md quotes.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <utility>
#include <vector>

#include "common/random.h"
#include "model/output_sketch.h"
#include "node/compute/output_check.h"
#include "node/compute/task_runner.h"
#include "node/compute/torch_stage_compute.h"
#include "node/compute/verify_test_util.h"

namespace skipswarm::node {
namespace {

constexpr int kMicroBatches = 100;

using testing::LyingCompute;
using testing::RunTask;
using testing::Tally;

class VerifiedComputeTest : public ::testing::Test {
 protected:
  std::unique_ptr<TorchStageCompute> Make(int stage, const model::EncodeOptions& codec,
                                          bool bf16_autocast = false) {
    TorchStageCompute::Options o;
    o.runtime.bf16_autocast = bf16_autocast;
    o.model = testing::VerifyConfig();
    o.stage = stage;
    o.encode = codec;
    absl::StatusOr<std::unique_ptr<TorchStageCompute>> c = TorchStageCompute::Create(o, &runner_);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  // `n` micro-batches: stage 0 starts each, X forwards it (for training),
  // Y sketches the same input frame, the check judges X's output.
  Tally RunChecks(const model::EncodeOptions& codec, StageCompute& x, TorchStageCompute& y,
                  int n, uint64_t seed, const model::SketchCheckOptions& options = {}) {
    std::unique_ptr<TorchStageCompute> s0 = Make(0, codec);
    common::Random rng(seed);
    Tally tally;
    for (int i = 0; i < n; ++i) {
      const uint64_t mb = static_cast<uint64_t>(i);
      absl::StatusOr<WireTensor> in = RunTask<WireTensor>(
          clock_,
          [&](TensorDone done) { s0->Start(mb, testing::VerifyBatch(rng), std::move(done)); });
      EXPECT_TRUE(in.ok()) << in.status();
      if (!in.ok()) return tally;
      s0->Discard(mb);
      absl::StatusOr<WireTensor> out = RunTask<WireTensor>(
          clock_, [&](TensorDone done) { x.Forward(mb, *in, std::move(done)); });
      EXPECT_TRUE(out.ok()) << out.status();
      x.Discard(mb);
      const uint64_t check_seed = rng();
      absl::StatusOr<model::OutputSketch> sketch = RunTask<model::OutputSketch>(
          clock_, [&](SketchDone done) {
            y.SketchForward(*in, check_seed, std::move(done));
          });
      EXPECT_TRUE(sketch.ok()) << sketch.status();
      if (!out.ok() || !sketch.ok()) return tally;
      absl::StatusOr<model::SketchVerdict> v = CheckOutputAgainstSketch(*out, *sketch, options);
      EXPECT_TRUE(v.ok()) << v.status();
      if (!v.ok()) return tally;
      tally.Add(*v, sketch->norm);
    }
    return tally;
  }

  common::SimClock clock_;
  ClockTaskRunner runner_{&clock_};
};

TEST_F(VerifiedComputeTest, VerifyOnlyForwardLeavesTheReplicaAsItWas) {
  std::unique_ptr<TorchStageCompute> s0 = Make(0, {});
  std::unique_ptr<TorchStageCompute> y = Make(1, {});
  common::Random rng(1);
  absl::StatusOr<WireTensor> in =
      RunTask<WireTensor>(clock_, [&](TensorDone done) {
        s0->Start(7, testing::VerifyBatch(rng), std::move(done));
      });
  ASSERT_TRUE(in.ok()) << in.status();
  const uint64_t digest = y->ParamsDigest();
  absl::StatusOr<model::OutputSketch> sketch = RunTask<model::OutputSketch>(
      clock_, [&](SketchDone done) { y->SketchForward(*in, 3, std::move(done)); });
  ASSERT_TRUE(sketch.ok()) << sketch.status();
  EXPECT_EQ(sketch->shape, (std::vector<int64_t>{4, 32, 64}));
  EXPECT_EQ(y->pending(), 0u);
  EXPECT_EQ(y->ParamsDigest(), digest);
  EXPECT_EQ(y->step(), 0);
  absl::StatusOr<GradientSum> grads = y->TakeGradients();
  ASSERT_TRUE(grads.ok());
  EXPECT_EQ(grads->visits, 0);
  EXPECT_TRUE(std::all_of(grads->flat.begin(), grads->flat.end(), [](float g) { return g == 0; }));
  // The same id trains afterwards (nothing of it was kept), and the sketch
  // is of exactly that training forward's output.
  absl::StatusOr<WireTensor> out =
      RunTask<WireTensor>(clock_, [&](TensorDone done) { y->Forward(7, *in, std::move(done)); });
  ASSERT_TRUE(out.ok()) << out.status();
  absl::StatusOr<model::SketchVerdict> v = CheckOutputAgainstSketch(*out, *sketch);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE(v->match) << v->reason;
  EXPECT_LE(v->norm_gap, 1e-6 * sketch->norm);
}

TEST_F(VerifiedComputeTest, SketchForwardRefusesStageZeroAndBadInput) {
  std::unique_ptr<TorchStageCompute> s0 = Make(0, {});
  std::unique_ptr<TorchStageCompute> s1 = Make(1, {});
  WireTensor junk;
  junk.meta.set_codec(proto::CODEC_RAW_FP32);
  junk.meta.set_dtype(proto::DTYPE_FLOAT32);
  junk.meta.add_shape(4);
  junk.meta.add_shape(32);
  junk.meta.add_shape(64);
  junk.payload = absl::Cord("short");
  for (TorchStageCompute* c : {s0.get(), s1.get()}) {
    absl::StatusOr<model::OutputSketch> s = RunTask<model::OutputSketch>(
        clock_, [&](SketchDone done) { c->SketchForward(junk, 1, std::move(done)); });
    EXPECT_EQ(s.status().code(), c == s0.get() ? absl::StatusCode::kFailedPrecondition
                                               : absl::StatusCode::kInvalidArgument)
        << s.status();
  }
  EXPECT_EQ(s1->pending(), 0u);
}

TEST_F(VerifiedComputeTest, HonestReplicasAreNeverFlagged) {
  for (const model::EncodeOptions& codec : testing::WireCodecs()) {
    std::unique_ptr<TorchStageCompute> x = Make(1, codec);
    std::unique_ptr<TorchStageCompute> y = Make(1, codec);
    ASSERT_EQ(x->ParamsDigest(), y->ParamsDigest());
    Tally t = RunChecks(codec, *x, *y, kMicroBatches, 11);
    EXPECT_EQ(t.checks, kMicroBatches);
    EXPECT_EQ(t.flagged, 0) << model::CodecName(codec.codec);
    std::printf("FIGURE honest %s: %d/%d flagged, worst energy/limit %.3g, worst norm gap/bound %.3g\n",
                model::CodecName(codec.codec), t.flagged, t.checks, t.worst_energy, t.worst_gap);
  }
}

// Honest replicas that differ in precision: X under bf16 autocast, Y in
// float32. The default device term (for float32 replicas) flags it; the
// bound must be widened for mixed-precision pairs
// (SketchCheckOptions::device_rel), and this measures by how much.
TEST_F(VerifiedComputeTest, MixedPrecisionReplicasNeedAWiderDeviceTerm) {
  const model::EncodeOptions codec{model::Codec::kRawFp32};
  std::unique_ptr<TorchStageCompute> x = Make(1, codec, /*bf16_autocast=*/true);
  std::unique_ptr<TorchStageCompute> y = Make(1, codec);
  Tally strict = RunChecks(codec, *x, *y, kMicroBatches / 4, 15);
  EXPECT_EQ(strict.flagged, strict.checks);
  model::SketchCheckOptions mixed;
  mixed.device_rel = 5e-3;
  Tally wide = RunChecks(codec, *x, *y, kMicroBatches / 4, 15, mixed);
  EXPECT_EQ(wide.flagged, 0);
  // The wider term still catches a x1.05 liar.
  LyingCompute liar(x.get(), LyingCompute::Where::kForward, LyingCompute::Lie::kScale, 1.05);
  Tally caught = RunChecks(codec, liar, *y, kMicroBatches / 4, 16, mixed);
  EXPECT_EQ(caught.flagged, caught.checks);
  std::printf("FIGURE bf16-autocast X vs fp32 Y: %d/%d flagged at device_rel 1e-4, %d/%d at 5e-3 "
              "(x1.05 liar: %d/%d); worst ||y_X - y_Y|| / ||y|| ~ %.3g\n",
              strict.flagged, strict.checks, wide.flagged, wide.checks, caught.flagged,
              caught.checks, strict.worst_rel);
}

TEST_F(VerifiedComputeTest, ScaledActivationsAreDetected) {
  for (const model::EncodeOptions& codec : testing::WireCodecs()) {
    std::unique_ptr<TorchStageCompute> honest = Make(1, codec);
    std::unique_ptr<TorchStageCompute> y = Make(1, codec);
    LyingCompute liar(honest.get(), LyingCompute::Where::kForward, LyingCompute::Lie::kScale,
                       1.05);
    Tally t = RunChecks(codec, liar, *y, kMicroBatches, 12);
    EXPECT_EQ(t.flagged, kMicroBatches) << model::CodecName(codec.codec);
    std::printf("FIGURE x1.05 %s: %d/%d flagged\n", model::CodecName(codec.codec), t.flagged, t.checks);
    // A subtler lie, reported (int8's own noise is ~1% of the norm).
    LyingCompute slight(honest.get(), LyingCompute::Where::kForward, LyingCompute::Lie::kScale,
                        1.01);
    Tally s = RunChecks(codec, slight, *y, kMicroBatches, 13);
    std::printf("FIGURE x1.01 %s: %d/%d flagged\n", model::CodecName(codec.codec), s.flagged, s.checks);
  }
}

TEST_F(VerifiedComputeTest, RandomActivationsOfTheRightNormAreDetected) {
  for (const model::EncodeOptions& codec : testing::WireCodecs()) {
    std::unique_ptr<TorchStageCompute> honest = Make(1, codec);
    std::unique_ptr<TorchStageCompute> y = Make(1, codec);
    LyingCompute liar(honest.get(), LyingCompute::Where::kForward, LyingCompute::Lie::kRandom,
                       1.0);
    Tally t = RunChecks(codec, liar, *y, kMicroBatches, 14);
    EXPECT_EQ(t.flagged, kMicroBatches) << model::CodecName(codec.codec);
    std::printf("FIGURE random %s: %d/%d flagged\n", model::CodecName(codec.codec), t.flagged, t.checks);
  }
}

}  // namespace
}  // namespace skipswarm::node
