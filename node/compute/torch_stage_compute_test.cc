#include "node/compute/torch_stage_compute.h"

#include <ATen/ATen.h>

#include <optional>

#include "common/sim_clock.h"
#include "gtest/gtest.h"
#include "model/local_pipeline.h"
#include "node/compute/verify_test_util.h"

namespace skipswarm::node {
namespace {

model::ModelConfig TinyConfig() {
  model::ModelConfig c;
  c.num_layers = 2;
  c.d_model = 32;
  c.num_heads = 2;
  c.ffn_dim = 64;
  c.seq_len = 16;
  c.num_stages = 2;
  return c;
}

MicroBatchData Batch(int64_t samples, int64_t seq, int64_t salt) {
  MicroBatchData d;
  d.samples = samples;
  d.seq = seq;
  for (int64_t i = 0; i < samples * seq; ++i) {
    d.tokens.push_back((i * 31 + salt * 7) % 256);
    d.targets.push_back((i * 17 + salt * 3 + 1) % 256);
  }
  return d;
}

using testing::RunTask;

class TorchStageComputeTest : public ::testing::Test {
 protected:
  void SetUp() override { MakeStages(&stages_); }

  void MakeStages(std::vector<std::unique_ptr<TorchStageCompute>>* stages) {
    for (int s = 0; s < 2; ++s) {
      TorchStageCompute::Options o;
      o.model = TinyConfig();
      o.stage = s;
      auto c = TorchStageCompute::Create(o, &runner_);
      ASSERT_TRUE(c.ok()) << c.status();
      stages->push_back(*std::move(c));
    }
  }

  // One micro-batch through both stages (of `stages`, default stages_);
  // returns its loss.
  absl::StatusOr<double> Train(uint64_t mb, const MicroBatchData& d,
                               std::vector<std::unique_ptr<TorchStageCompute>>* stages = nullptr) {
    if (stages == nullptr) stages = &stages_;
    TorchStageCompute& s0 = *(*stages)[0];
    TorchStageCompute& s1 = *(*stages)[1];
    auto x = RunTask<WireTensor>(clock_, [&](TensorDone done) { s0.Start(mb, d, std::move(done)); });
    if (!x.ok()) return x.status();
    auto y = RunTask<WireTensor>(clock_, [&](TensorDone done) { s1.Forward(mb, *x, std::move(done)); });
    if (!y.ok()) return y.status();
    auto t = RunTask<TailOutput>(clock_, [&](TailDone done) { s0.Tail(mb, *y, std::move(done)); });
    if (!t.ok()) return t.status();
    auto gy = RunTask<WireTensor>(clock_,
                              [&](TensorDone done) { s1.Backward(mb, t->grad, std::move(done)); });
    if (!gy.ok()) return gy.status();
    auto end = RunTask<WireTensor>(clock_,
                               [&](TensorDone done) { s0.Backward(mb, *gy, std::move(done)); });
    if (!end.ok()) return end.status();
    return t->loss;
  }

  common::SimClock clock_;
  ClockTaskRunner runner_{&clock_};
  std::vector<std::unique_ptr<TorchStageCompute>> stages_;
};

TEST_F(TorchStageComputeTest, MatchesLocalPipelineLossAndGradients) {
  auto pipe = model::LocalPipeline::Create(TinyConfig());
  ASSERT_TRUE(pipe.ok());
  MicroBatchData d = Batch(2, 16, 1);
  at::Tensor tokens = at::tensor(d.tokens, at::kLong).view({2, 16});
  at::Tensor targets = at::tensor(d.targets, at::kLong).view({2, 16});
  absl::StatusOr<double> want = (*pipe)->TrainMicroBatch(0, {0, 1}, tokens, targets);
  ASSERT_TRUE(want.ok());
  absl::StatusOr<double> got = Train(0, d);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_NEAR(*got, *want, 1e-6 * std::abs(*want));
  for (int s = 0; s < 2; ++s) {
    auto sum = stages_[s]->TakeGradients();
    ASSERT_TRUE(sum.ok());
    EXPECT_EQ(sum->visits, 1);
    std::vector<at::Tensor> params = (*pipe)->stage(s).module().parameters();
    int64_t offset = 0;
    double max_diff = 0;
    for (const at::Tensor& p : params) {
      at::Tensor g = p.grad().contiguous();
      for (int64_t i = 0; i < g.numel(); ++i) {
        max_diff = std::max<double>(max_diff,
                                    std::abs(g.data_ptr<float>()[i] - sum->flat[offset + i]));
      }
      offset += p.numel();
    }
    EXPECT_EQ(offset, stages_[s]->num_params());
    EXPECT_LT(max_diff, 1e-6) << "stage " << s;
  }
}

TEST_F(TorchStageComputeTest, UpdateChangesDigestAndZeroesVisits) {
  uint64_t before = stages_[1]->ParamsDigest();
  ASSERT_TRUE(Train(0, Batch(1, 8, 2)).ok());
  auto sum = stages_[1]->TakeGradients();
  ASSERT_TRUE(sum.ok());
  ASSERT_TRUE(stages_[1]->ApplyUpdate(sum->flat, sum->visits).ok());
  EXPECT_NE(stages_[1]->ParamsDigest(), before);
  EXPECT_EQ(stages_[1]->step(), 1);
  EXPECT_EQ(stages_[1]->TakeGradients()->visits, 0);
}

// Note [Group of one] (node/train/node_trainer.cc): the in-place step of a
// lone replica equals the host round trip (TakeGradients, ApplyUpdate) to
// the byte, step after step.
TEST_F(TorchStageComputeTest, LocalUpdateEqualsTheHostPathBitForBit) {
  std::vector<std::unique_ptr<TorchStageCompute>> local;
  MakeStages(&local);
  for (int s = 0; s < 2; ++s) ASSERT_EQ(local[s]->ParamsDigest(), stages_[s]->ParamsDigest());
  for (int it = 0; it < 3; ++it) {
    for (uint64_t mb = 0; mb < 2; ++mb) {
      const MicroBatchData d = Batch(2, 8, 10 * it + static_cast<int64_t>(mb));
      ASSERT_TRUE(Train(mb, d).ok());
      ASSERT_TRUE(Train(mb, d, &local).ok());
    }
    for (int s = 0; s < 2; ++s) {
      auto sum = stages_[s]->TakeGradients();
      ASSERT_TRUE(sum.ok());
      auto host = stages_[s]->ApplyUpdate(sum->flat, sum->visits);
      ASSERT_TRUE(host.ok()) << host.status();
      auto in_place = local[s]->ApplyLocalUpdate();
      ASSERT_TRUE(in_place.ok()) << in_place.status();
      EXPECT_TRUE(in_place->stepped);
      EXPECT_FALSE(in_place->nonfinite);
      EXPECT_EQ(in_place->visits, 2);
      EXPECT_EQ(in_place->grad_norm, host->grad_norm) << "stage " << s << " iteration " << it;
      EXPECT_EQ(local[s]->ParamsDigest(), stages_[s]->ParamsDigest())
          << "stage " << s << " iteration " << it;
      EXPECT_EQ(local[s]->step(), it + 1);
      EXPECT_EQ(local[s]->TakeGradients()->visits, 0);
    }
  }
}

TEST_F(TorchStageComputeTest, RejectsBadInputWithStatus) {
  // Wrong width: [1, 4, 16] instead of [B, T, 32].
  auto bad = RunTask<WireTensor>(clock_, [&](TensorDone done) {
    MicroBatchData d = Batch(1, 4, 0);
    d.tokens.pop_back();
    stages_[0]->Start(1, d, std::move(done));
  });
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status())) << bad.status();
  WireTensor x;
  x.meta.set_dtype(proto::DTYPE_FLOAT32);
  x.meta.set_codec(proto::CODEC_RAW_FP32);
  x.meta.add_shape(1);
  x.meta.add_shape(4);
  x.meta.add_shape(16);
  x.meta.set_payload_bytes(64 * 4);
  x.payload = absl::Cord(std::string(64 * 4, '\0'));
  auto wrong = RunTask<WireTensor>(clock_,
                               [&](TensorDone done) { stages_[1]->Forward(1, x, std::move(done)); });
  EXPECT_FALSE(wrong.ok());
  auto unknown = RunTask<WireTensor>(
      clock_, [&](TensorDone done) { stages_[1]->Backward(5, x, std::move(done)); });
  EXPECT_FALSE(unknown.ok());
  auto tail = RunTask<TailOutput>(clock_, [&](TailDone done) { stages_[0]->Tail(9, x, std::move(done)); });
  EXPECT_FALSE(tail.ok());
}

// Note [Digest cache]: the digest is kept between calls, and every change
// of the parameters (here the outer step, which changes no step count) is
// seen by the next call, equal to a replica that made the same change.
TEST_F(TorchStageComputeTest, DigestFollowsTheOuterStep) {
  TorchStageCompute::Options o;
  o.model = TinyConfig();
  o.stage = 1;
  o.averaging.outer_every = 2;
  auto a = TorchStageCompute::Create(o, &runner_);
  auto b = TorchStageCompute::Create(o, &runner_);
  ASSERT_TRUE(a.ok() && b.ok());
  const uint64_t start = (*a)->ParamsDigest();
  EXPECT_EQ((*a)->ParamsDigest(), start);  // kept
  std::vector<float> pseudo((*a)->num_params(), 0.01f);
  ASSERT_TRUE((*a)->ApplyOuterStep(pseudo, 1).ok());
  const uint64_t after = (*a)->ParamsDigest();
  EXPECT_NE(after, start);
  EXPECT_EQ((*b)->ParamsDigest(), start);
  ASSERT_TRUE((*b)->ApplyOuterStep(pseudo, 1).ok());
  EXPECT_EQ((*b)->ParamsDigest(), after);
}

}  // namespace
}  // namespace skipswarm::node

namespace skipswarm::node {
namespace {

TEST_F(TorchStageComputeTest, CheckpointRoundTripRestoresDigestAndStep) {
  ASSERT_TRUE(Train(0, Batch(1, 8, 3)).ok());
  auto sum = stages_[1]->TakeGradients();
  ASSERT_TRUE(stages_[1]->ApplyUpdate(sum->flat, sum->visits).ok());
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/s1.ckpt";
  ASSERT_TRUE(stages_[1]->SaveCheckpoint(path).ok());
  const uint64_t digest = stages_[1]->ParamsDigest();
  TorchStageCompute::Options o;
  o.model = TinyConfig();
  o.stage = 1;
  auto fresh = TorchStageCompute::Create(o, &runner_);
  ASSERT_TRUE(fresh.ok());
  EXPECT_NE((*fresh)->ParamsDigest(), digest);
  auto step = (*fresh)->LoadCheckpoint(path);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(*step, 1);
  EXPECT_EQ((*fresh)->ParamsDigest(), digest);
}

TEST_F(TorchStageComputeTest, ExportedStateImportsIntoAFreshReplica) {
  ASSERT_TRUE(Train(0, Batch(1, 8, 3)).ok());
  auto sum = stages_[1]->TakeGradients();
  ASSERT_TRUE(stages_[1]->ApplyUpdate(sum->flat, sum->visits).ok());
  absl::StatusOr<std::string> state = stages_[1]->ExportState();
  ASSERT_TRUE(state.ok()) << state.status();
  TorchStageCompute::Options o;
  o.model = TinyConfig();
  o.stage = 1;
  auto fresh = TorchStageCompute::Create(o, &runner_);
  ASSERT_TRUE(fresh.ok());
  ASSERT_NE((*fresh)->ParamsDigest(), stages_[1]->ParamsDigest());
  absl::StatusOr<int64_t> step = (*fresh)->ImportState(*state);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(*step, 1);
  EXPECT_EQ((*fresh)->ParamsDigest(), stages_[1]->ParamsDigest());
  // Another stage's state is refused.
  o.stage = 0;
  auto other = TorchStageCompute::Create(o, &runner_);
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE((*other)->ImportState(*state).ok());
  EXPECT_FALSE((*other)->ImportState("not a state").ok());
}

}  // namespace
}  // namespace skipswarm::node
