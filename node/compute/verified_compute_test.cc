// Verified compute in process (Note [Output sketch], Note [Verify-only
// forward]): two replicas X and Y of stage 1 with equal weights; stage 0
// makes real activations; Y sketches the forward X runs, and the check
// compares X's output as it would arrive at the hop after. Honest X is
// never flagged; a lying X (scaled or random activations) is, with every
// wire codec. Prints the figures tests/adversarial/README.md quotes.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "common/random.h"
#include "common/sim_clock.h"
#include "model/output_sketch.h"
#include "model/tensor_codec.h"
#include "node/compute/forwarding_stage_compute.h"
#include "node/compute/output_check.h"
#include "node/compute/task_runner.h"
#include "node/compute/torch_stage_compute.h"

namespace skipswarm::node {
namespace {

constexpr int kMicroBatches = 100;

model::ModelConfig Config() {
  model::ModelConfig c;
  c.num_layers = 6;
  c.d_model = 64;
  c.num_heads = 4;
  c.ffn_dim = 128;
  c.seq_len = 32;
  c.num_stages = 3;
  c.init_seed = 5;
  return c;
}

MicroBatchData Batch(common::Random& rng) {
  MicroBatchData d;
  d.samples = 4;
  d.seq = 32;
  for (int64_t i = 0; i < d.samples * d.seq; ++i) {
    d.tokens.push_back(rng.UniformInt(0, 255));
    d.targets.push_back(rng.UniformInt(0, 255));
  }
  return d;
}

// Runs one task to completion on the sim clock.
template <typename T, typename Call>
absl::StatusOr<T> RunTask(common::SimClock& clock, Call call) {
  std::optional<absl::StatusOr<T>> out;
  call([&](absl::StatusOr<T> r) { out = std::move(r); });
  EXPECT_FALSE(out.has_value()) << "done ran inline";
  clock.RunDue();
  EXPECT_TRUE(out.has_value());
  return out.has_value() ? std::move(*out) : absl::InternalError("task did not run");
}

// A replica that computes honestly, then lies in the activation it sends:
// x factor, or values of the same norm drawn at random; re-encoded with the
// codec the honest output had, as a liar would to pass the decoder.
class LyingForward final : public ForwardingStageCompute {
 public:
  enum class Lie { kScale, kRandom };
  LyingForward(StageCompute* inner, Lie lie, double factor)
      : ForwardingStageCompute(inner), lie_(lie), factor_(factor) {}

  void Forward(uint64_t mb, WireTensor input, TensorDone done) override {
    inner()->Forward(mb, std::move(input),
                     [this, done = std::move(done)](absl::StatusOr<WireTensor> y) mutable {
                       done(y.ok() ? Twist(*y) : y);
                     });
  }

 private:
  absl::StatusOr<WireTensor> Twist(const WireTensor& y) {
    const model::TensorMeta meta = FromProto(y.meta);
    model::DecodeExpectations want;
    absl::StatusOr<at::Tensor> t = model::DecodeTensor(meta, std::string(y.payload), want);
    if (!t.ok()) return t.status();
    at::Tensor lie = *t * factor_;
    if (lie_ == Lie::kRandom) {
      at::Generator gen = at::detail::createCPUGenerator(++draws_);
      at::Tensor r = at::randn(t->sizes(), gen);
      lie = r * (t->norm() / r.norm());
    }
    absl::StatusOr<model::EncodedTensor> enc =
        model::EncodeTensor(lie, {meta.codec, meta.block_size == 0 ? 256 : meta.block_size});
    if (!enc.ok()) return enc.status();
    return WireTensor{ToProto(enc->meta), absl::Cord(std::move(enc->payload))};
  }

  const Lie lie_;
  const double factor_;
  uint64_t draws_ = 0;
};

struct Tally {
  int checks = 0;
  int flagged = 0;
  double worst_energy = 0;  // energy / energy_limit over the checks
  double worst_gap = 0;     // norm_gap / error_bound
  double worst_rel = 0;     // sqrt(energy) / norm: ~ ||y_X - y_Y|| / ||y||
};

class VerifiedComputeTest : public ::testing::Test {
 protected:
  std::unique_ptr<TorchStageCompute> Make(int stage, const model::EncodeOptions& codec,
                                          bool bf16_autocast = false) {
    TorchStageCompute::Options o;
    o.runtime.bf16_autocast = bf16_autocast;
    o.model = Config();
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
          clock_, [&](TensorDone done) { s0->Start(mb, Batch(rng), std::move(done)); });
      EXPECT_TRUE(in.ok()) << in.status();
      if (!in.ok()) return tally;
      s0->Discard(mb);
      absl::StatusOr<WireTensor> out = RunTask<WireTensor>(
          clock_, [&](TensorDone done) { x.Forward(mb, *in, std::move(done)); });
      EXPECT_TRUE(out.ok()) << out.status();
      x.Discard(mb);
      const uint64_t check_seed = rng();
      absl::StatusOr<model::OutputSketch> sketch = RunTask<model::OutputSketch>(
          clock_, [&](TorchStageCompute::SketchDone done) {
            y.SketchForward(*in, check_seed, std::move(done));
          });
      EXPECT_TRUE(sketch.ok()) << sketch.status();
      if (!out.ok() || !sketch.ok()) return tally;
      absl::StatusOr<model::SketchVerdict> v = CheckOutputAgainstSketch(*out, *sketch, options);
      EXPECT_TRUE(v.ok()) << v.status();
      if (!v.ok()) return tally;
      ++tally.checks;
      tally.flagged += v->match ? 0 : 1;
      if (v->energy_limit > 0) {
        tally.worst_energy = std::max(tally.worst_energy, v->energy / v->energy_limit);
      }
      if (sketch->norm > 0) {
        tally.worst_rel = std::max(tally.worst_rel, std::sqrt(v->energy) / sketch->norm);
      }
      if (v->error_bound > 0) {
        tally.worst_gap = std::max(tally.worst_gap, v->norm_gap / v->error_bound);
      }
    }
    return tally;
  }

  static std::vector<model::EncodeOptions> Codecs() {
    return {{model::Codec::kRawFp32}, {model::Codec::kFp16}, {model::Codec::kBf16},
            {model::Codec::kInt8Blockwise, 256}};
  }

  common::SimClock clock_;
  ClockTaskRunner runner_{&clock_};
};

TEST_F(VerifiedComputeTest, VerifyOnlyForwardLeavesTheReplicaAsItWas) {
  std::unique_ptr<TorchStageCompute> s0 = Make(0, {});
  std::unique_ptr<TorchStageCompute> y = Make(1, {});
  common::Random rng(1);
  absl::StatusOr<WireTensor> in =
      RunTask<WireTensor>(clock_, [&](TensorDone done) { s0->Start(7, Batch(rng), std::move(done)); });
  ASSERT_TRUE(in.ok()) << in.status();
  const uint64_t digest = y->ParamsDigest();
  absl::StatusOr<model::OutputSketch> sketch = RunTask<model::OutputSketch>(
      clock_, [&](TorchStageCompute::SketchDone done) { y->SketchForward(*in, 3, std::move(done)); });
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
        clock_, [&](TorchStageCompute::SketchDone done) { c->SketchForward(junk, 1, std::move(done)); });
    EXPECT_EQ(s.status().code(), c == s0.get() ? absl::StatusCode::kFailedPrecondition
                                               : absl::StatusCode::kInvalidArgument)
        << s.status();
  }
  EXPECT_EQ(s1->pending(), 0u);
}

TEST_F(VerifiedComputeTest, HonestReplicasAreNeverFlagged) {
  for (const model::EncodeOptions& codec : Codecs()) {
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
  LyingForward liar(x.get(), LyingForward::Lie::kScale, 1.05);
  Tally caught = RunChecks(codec, liar, *y, kMicroBatches / 4, 16, mixed);
  EXPECT_EQ(caught.flagged, caught.checks);
  std::printf("FIGURE bf16-autocast X vs fp32 Y: %d/%d flagged at device_rel 1e-4, %d/%d at 5e-3 "
              "(x1.05 liar: %d/%d); worst ||y_X - y_Y|| / ||y|| ~ %.3g\n",
              strict.flagged, strict.checks, wide.flagged, wide.checks, caught.flagged,
              caught.checks, strict.worst_rel);
}

TEST_F(VerifiedComputeTest, ScaledActivationsAreDetected) {
  for (const model::EncodeOptions& codec : Codecs()) {
    std::unique_ptr<TorchStageCompute> honest = Make(1, codec);
    std::unique_ptr<TorchStageCompute> y = Make(1, codec);
    LyingForward liar(honest.get(), LyingForward::Lie::kScale, 1.05);
    Tally t = RunChecks(codec, liar, *y, kMicroBatches, 12);
    EXPECT_EQ(t.flagged, kMicroBatches) << model::CodecName(codec.codec);
    std::printf("FIGURE x1.05 %s: %d/%d flagged\n", model::CodecName(codec.codec), t.flagged, t.checks);
    // A subtler lie, reported (int8's own noise is ~1% of the norm).
    LyingForward slight(honest.get(), LyingForward::Lie::kScale, 1.01);
    Tally s = RunChecks(codec, slight, *y, kMicroBatches, 13);
    std::printf("FIGURE x1.01 %s: %d/%d flagged\n", model::CodecName(codec.codec), s.flagged, s.checks);
  }
}

TEST_F(VerifiedComputeTest, RandomActivationsOfTheRightNormAreDetected) {
  for (const model::EncodeOptions& codec : Codecs()) {
    std::unique_ptr<TorchStageCompute> honest = Make(1, codec);
    std::unique_ptr<TorchStageCompute> y = Make(1, codec);
    LyingForward liar(honest.get(), LyingForward::Lie::kRandom, 1.0);
    Tally t = RunChecks(codec, liar, *y, kMicroBatches, 14);
    EXPECT_EQ(t.flagged, kMicroBatches) << model::CodecName(codec.codec);
    std::printf("FIGURE random %s: %d/%d flagged\n", model::CodecName(codec.codec), t.flagged, t.checks);
  }
}

}  // namespace
}  // namespace skipswarm::node
