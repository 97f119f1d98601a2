// train-ref --sdp: the reference trainer simulating SDP workers, and the
// frozen-stage backward it rests on.
#include <gtest/gtest.h>

#include <cmath>

#include "model/checkpoint.h"
#include "model/local_pipeline.h"
#include "model/reference_trainer.h"
#include "model/route.h"
#include "model/sdp_assignment.h"
#include "model/test_util.h"

namespace skipswarm::model {
namespace {

Corpus TinyCorpus() {
  Corpus c;
  for (int i = 0; i < 5000; ++i) c.train.push_back((i * 7 + i / 13) % 32);
  for (int i = 0; i < 500; ++i) c.validation.push_back((i * 7 + i / 13) % 32);
  return c;
}

TrainerOptions Options(SdpMode mode, double keep, int mbs) {
  TrainerOptions o;
  o.model = testing::TinyConfig();
  o.model.num_stages = 6;
  o.optimizer.peak_lr = 1e-2;
  o.optimizer.warmup_steps = 2;
  o.optimizer.total_steps = 40;
  o.mbs_per_iteration = mbs;
  o.samples_per_mb = 2;
  o.sdp = {mode, 4, keep};
  return o;
}

std::vector<double> Losses(const TrainerOptions& o, int iterations) {
  Corpus corpus = TinyCorpus();
  auto trainer = ReferenceTrainer::Create(o, corpus);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  std::vector<double> out;
  for (int i = 0; i < iterations; ++i) {
    absl::StatusOr<IterationStats> s = (*trainer)->RunIteration();
    EXPECT_TRUE(s.ok()) << s.status();
    out.push_back(s->loss);
  }
  return out;
}

TEST(SdpReferenceTest, FrozenStagePassesTheInputGradientButTakesNone) {
  ModelConfig c = testing::TinyConfig();
  auto a = LocalPipeline::Create(c).value();
  auto b = LocalPipeline::Create(c).value();
  at::Tensor tokens = testing::TinyTokens(1), targets = testing::TinyTokens(2);
  ASSERT_TRUE(a->TrainMicroBatch(7, {0, 1, 2}, tokens, targets).ok());
  ASSERT_TRUE(b->TrainMicroBatch(7, {0, 1, 2}, tokens, targets, 1.0, {1}).ok());
  EXPECT_EQ(b->stage(1).visits(), 0);
  EXPECT_EQ(b->stage(2).visits(), 1);
  for (const auto& p : b->stage(1).module().parameters()) EXPECT_FALSE(p.grad().defined());
  // Stages 0 and 2 get exactly the gradients of the unfrozen model.
  for (int s : {0, 2}) {
    auto pa = a->stage(s).module().parameters(), pb = b->stage(s).module().parameters();
    ASSERT_EQ(pa.size(), pb.size());
    for (size_t i = 0; i < pa.size(); ++i) {
      EXPECT_TRUE(pa[i].grad().equal(pb[i].grad())) << "stage " << s << " parameter " << i;
    }
  }
  EXPECT_FALSE(b->TrainMicroBatch(8, {0, 1, 2}, tokens, targets, 1.0, {0}).ok());
}

TEST(SdpReferenceTest, EveryStageTrainsOnItsOwnersMicroBatches) {
  for (SdpMode mode : {SdpMode::kForward, SdpMode::kBackward}) {
    Corpus corpus = TinyCorpus();
    auto trainer = ReferenceTrainer::Create(Options(mode, 0.5, 2), corpus).value();
    absl::StatusOr<IterationStats> s = trainer->RunIteration();
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->tokens, 4 * 2 * 2 * 8);  // 4 workers x 2 MBs x [2, 8]
    const SdpAssignment& a = trainer->sdp_assignment();
    for (int st = 0; st < 6; ++st) EXPECT_EQ(s->visits[st], 2 * a.coverage[st]) << st;
  }
}

TEST(SdpReferenceTest, FullKeepIsDataParallelismAtTheGlobalBatch) {
  // Every worker trains the whole model: K workers x M MBs = the plain
  // trainer at K*M MBs per iteration, in the same data order.
  TrainerOptions plain = Options(SdpMode::kOff, 1.0, 8);
  std::vector<double> want = Losses(plain, 4);
  for (SdpMode mode : {SdpMode::kForward, SdpMode::kBackward}) {
    std::vector<double> got = Losses(Options(mode, 1.0, 2), 4);
    for (int i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(got[i], want[i]) << i;
  }
}

TEST(SdpReferenceTest, BackwardMaskingRunsTheWholeModelForward) {
  // The first iteration's loss is the full model's on the same data; forward
  // masking's is not (its routes skip half the stages).
  std::vector<double> full = Losses(Options(SdpMode::kOff, 1.0, 8), 1);
  std::vector<double> backward = Losses(Options(SdpMode::kBackward, 0.5, 2), 2);
  std::vector<double> forward = Losses(Options(SdpMode::kForward, 0.5, 2), 2);
  EXPECT_DOUBLE_EQ(backward[0], full[0]);
  EXPECT_NE(forward[0], full[0]);
  EXPECT_NE(backward[1], forward[1]);
  for (double l : backward) EXPECT_TRUE(std::isfinite(l));
}

TEST(SdpReferenceTest, ForwardMaskingCheckpointRecordsItsDepthForEvaluation) {
  Corpus corpus = TinyCorpus();
  auto trainer = ReferenceTrainer::Create(Options(SdpMode::kForward, 0.5, 1), corpus).value();
  EXPECT_DOUBLE_EQ(trainer->effective_skip_ratio(), 0.5);  // 3 of 6 stages
  auto backward = ReferenceTrainer::Create(Options(SdpMode::kBackward, 0.5, 1), corpus).value();
  EXPECT_DOUBLE_EQ(backward->effective_skip_ratio(), 0.0);
}

TEST(SdpReferenceTest, RefusesAnUnbalancedAssignment) {
  TrainerOptions o = Options(SdpMode::kForward, 0.5, 1);
  o.sdp.workers = 3;
  Corpus corpus = TinyCorpus();
  EXPECT_EQ(ReferenceTrainer::Create(o, corpus).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace skipswarm::model
