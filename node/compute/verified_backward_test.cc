// Verified compute for the backward (tests/adversarial/README.md,
// "Verified compute", item 5): replica Y recomputes the input gradient
// that replica X returns for a micro-batch (X's forward input and the
// gradient X received; TorchStageCompute::SketchBackward) and sketches it;
// the check compares X's input gradient as it would arrive at the hop
// before. Honest X is never flagged; a lying X (scaled or random input
// gradients) is, with every wire codec. Prints FIGURE lines.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <utility>
#include <vector>

#include "common/random.h"
#include "common/sim_clock.h"
#include "model/output_sketch.h"
#include "node/compute/output_check.h"
#include "node/compute/task_runner.h"
#include "node/compute/torch_stage_compute.h"
#include "node/compute/verify_test_util.h"

namespace skipswarm::node {
namespace {

constexpr int kMicroBatches = 50;

using testing::LyingCompute;
using testing::RunTask;
using testing::Tally;

class VerifiedBackwardTest : public ::testing::Test {
 protected:
  std::unique_ptr<TorchStageCompute> Make(int stage, const model::EncodeOptions& codec) {
    TorchStageCompute::Options o;
    o.model = testing::VerifyConfig();
    o.stage = stage;
    o.encode = codec;
    absl::StatusOr<std::unique_ptr<TorchStageCompute>> c = TorchStageCompute::Create(o, &runner_);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  // `n` micro-batches along stage 0 -> X -> stage 0's tail -> X's backward;
  // Y sketches the input gradient from X's input and X's gradient input.
  Tally RunChecks(const model::EncodeOptions& codec, StageCompute& x, TorchStageCompute& y,
                  int n, uint64_t seed) {
    std::unique_ptr<TorchStageCompute> s0 = Make(0, codec);
    common::Random rng(seed);
    Tally tally;
    for (int i = 0; i < n; ++i) {
      const uint64_t mb = static_cast<uint64_t>(i);
      absl::StatusOr<WireTensor> in = RunTask<WireTensor>(clock_, [&](TensorDone done) {
        s0->Start(mb, testing::VerifyBatch(rng), std::move(done));
      });
      EXPECT_TRUE(in.ok()) << in.status();
      if (!in.ok()) return tally;
      absl::StatusOr<WireTensor> out = RunTask<WireTensor>(
          clock_, [&](TensorDone done) { x.Forward(mb, *in, std::move(done)); });
      EXPECT_TRUE(out.ok()) << out.status();
      if (!out.ok()) return tally;
      absl::StatusOr<TailOutput> tail = RunTask<TailOutput>(
          clock_, [&](TailDone done) { s0->Tail(mb, *out, std::move(done)); });
      EXPECT_TRUE(tail.ok()) << tail.status();
      if (!tail.ok()) return tally;
      s0->Discard(mb);
      absl::StatusOr<WireTensor> gx = RunTask<WireTensor>(
          clock_, [&](TensorDone done) { x.Backward(mb, tail->grad, std::move(done)); });
      EXPECT_TRUE(gx.ok()) << gx.status();
      const uint64_t check_seed = rng();
      absl::StatusOr<model::OutputSketch> sketch = RunTask<model::OutputSketch>(
          clock_, [&](SketchDone done) {
            y.SketchBackward(*in, tail->grad, check_seed, std::move(done));
          });
      EXPECT_TRUE(sketch.ok()) << sketch.status();
      if (!gx.ok() || !sketch.ok()) return tally;
      absl::StatusOr<model::SketchVerdict> v = CheckOutputAgainstSketch(*gx, *sketch);
      EXPECT_TRUE(v.ok()) << v.status();
      if (!v.ok()) return tally;
      tally.Add(*v, sketch->norm);
    }
    return tally;
  }

  common::SimClock clock_;
  ClockTaskRunner runner_{&clock_};
};

TEST_F(VerifiedBackwardTest, VerifyOnlyBackwardLeavesTheReplicaAsItWas) {
  const model::EncodeOptions codec{model::Codec::kRawFp32};
  std::unique_ptr<TorchStageCompute> x = Make(1, codec);
  std::unique_ptr<TorchStageCompute> y = Make(1, codec);
  const uint64_t digest = y->ParamsDigest();
  Tally t = RunChecks(codec, *x, *y, 3, 1);
  EXPECT_EQ(t.checks, 3);
  EXPECT_EQ(y->pending(), 0u);
  EXPECT_EQ(y->ParamsDigest(), digest);
  absl::StatusOr<GradientSum> grads = y->TakeGradients();
  ASSERT_TRUE(grads.ok());
  EXPECT_EQ(grads->visits, 0);
  EXPECT_TRUE(std::all_of(grads->flat.begin(), grads->flat.end(), [](float g) { return g == 0; }));
  // X did train: its visits count the three backwards.
  absl::StatusOr<GradientSum> xg = x->TakeGradients();
  ASSERT_TRUE(xg.ok());
  EXPECT_EQ(xg->visits, 3);
}

TEST_F(VerifiedBackwardTest, SketchBackwardRefusesStageZeroAndMismatchedShapes) {
  const model::EncodeOptions codec{model::Codec::kRawFp32};
  std::unique_ptr<TorchStageCompute> s0 = Make(0, codec);
  std::unique_ptr<TorchStageCompute> s1 = Make(1, codec);
  common::Random rng(2);
  absl::StatusOr<WireTensor> in = RunTask<WireTensor>(clock_, [&](TensorDone done) {
    s0->Start(1, testing::VerifyBatch(rng), std::move(done));
  });
  ASSERT_TRUE(in.ok()) << in.status();
  absl::StatusOr<model::EncodedTensor> small = model::EncodeTensor(at::zeros({4, 16, 64}), {});
  ASSERT_TRUE(small.ok());
  const WireTensor wrong{ToProto(small->meta), absl::Cord(small->payload)};
  const auto sketch = [&](TorchStageCompute& c, const WireTensor& g) {
    return RunTask<model::OutputSketch>(clock_, [&](SketchDone done) {
             c.SketchBackward(*in, g, 1, std::move(done));
           })
        .status()
        .code();
  };
  EXPECT_EQ(sketch(*s0, *in), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(sketch(*s1, wrong), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s1->pending(), 0u);
}

TEST_F(VerifiedBackwardTest, HonestReplicasAreNeverFlagged) {
  for (const model::EncodeOptions& codec : testing::WireCodecs()) {
    std::unique_ptr<TorchStageCompute> x = Make(1, codec);
    std::unique_ptr<TorchStageCompute> y = Make(1, codec);
    Tally t = RunChecks(codec, *x, *y, kMicroBatches, 21);
    EXPECT_EQ(t.checks, kMicroBatches);
    EXPECT_EQ(t.flagged, 0) << model::CodecName(codec.codec);
    std::printf("FIGURE backward honest %s: %d/%d flagged, worst energy/limit %.3g, worst norm "
                "gap/bound %.3g\n",
                model::CodecName(codec.codec), t.flagged, t.checks, t.worst_energy, t.worst_gap);
  }
}

TEST_F(VerifiedBackwardTest, ScaledOrRandomInputGradientsAreDetected) {
  for (const model::EncodeOptions& codec : testing::WireCodecs()) {
    for (const auto& [lie, factor] :
         {std::pair{LyingCompute::Lie::kScale, 1.05}, std::pair{LyingCompute::Lie::kRandom, 1.0}}) {
      std::unique_ptr<TorchStageCompute> honest = Make(1, codec);
      std::unique_ptr<TorchStageCompute> y = Make(1, codec);
      LyingCompute liar(honest.get(), LyingCompute::Where::kBackward, lie, factor);
      Tally t = RunChecks(codec, liar, *y, kMicroBatches / 2, 22);
      EXPECT_EQ(t.flagged, kMicroBatches / 2) << model::CodecName(codec.codec);
      std::printf("FIGURE backward %s %s: %d/%d flagged\n",
                  lie == LyingCompute::Lie::kScale ? "x1.05" : "random",
                  model::CodecName(codec.codec), t.flagged, t.checks);
    }
  }
}

}  // namespace
}  // namespace skipswarm::node
