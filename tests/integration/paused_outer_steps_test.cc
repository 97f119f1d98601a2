// A volunteer's pause (Note [Paused members] in
// node/daemon/gossip/training_members.h) with outer steps (Note [Outer
// steps], H = 4) on real libtorch computes, in an in-process swarm of 2
// data nodes and 2 replicas of every other stage on the simulated clock:
// a replica paused during a round's inner steps and resumed has its
// replica's digest after every sync, and one paused for a whole round adds
// no weight to the outer step (Note [Idle outer contributions] in
// node/train/node_trainer.h) yet applies it.
#include <memory>
#include <optional>
#include <vector>

#include "gtest/gtest.h"
#include "model/averaging_options.h"
#include "model/model_config.h"
#include "model/optimizer_options.h"
#include "model/tiny_config.h"
#include "node/compute/forwarding_stage_compute.h"
#include "node/compute/torch_stage_compute.h"
#include "node/train/sampler_data_source.h"
#include "node/train/test_swarm.h"

namespace skipswarm::node {
namespace {

constexpr int kH = 4;
constexpr int kPaused = 3;   // stage 1's second replica
constexpr int kReplica = 2;  // stage 1's first

// What the trainer handed a compute at its last sync.
class SyncRecorder final : public ForwardingStageCompute {
 public:
  using ForwardingStageCompute::ForwardingStageCompute;
  absl::StatusOr<AverageContribution> TakePseudoGradient() override {
    absl::StatusOr<AverageContribution> a = inner()->TakePseudoGradient();
    if (a.ok()) sent = *a;
    return a;
  }
  absl::StatusOr<UpdateStats> ApplyOuterStep(const std::vector<float>& summed,
                                             int contributors) override {
    applied_sum = summed;
    applied_contributors = contributors;
    return inner()->ApplyOuterStep(summed, contributors);
  }
  std::optional<AverageContribution> sent;
  std::vector<float> applied_sum;
  int applied_contributors = -1;
};

model::Corpus TinyCorpus() {
  model::Corpus c;
  for (int i = 0; i < 5000; ++i) c.train.push_back((i * 7 + i / 13) % 32);
  for (int i = 0; i < 500; ++i) c.validation.push_back((i * 7 + i / 13) % 32);
  return c;
}

struct Swarm {
  model::Corpus corpus = TinyCorpus();
  std::unique_ptr<SamplerDataSource> data;
  std::unique_ptr<TestSwarm> swarm;
  SyncRecorder* recorder(int node) {
    return dynamic_cast<SyncRecorder*>(swarm->compute(node, node / 2));
  }
};

// Nodes 0, 1: stage 0; nodes 2s, 2s+1: stage s.
std::unique_ptr<Swarm> MakeSwarm(bool overlap) {
  auto s = std::make_unique<Swarm>();
  model::ModelConfig m = model::testing::TinyConfig();
  m.num_layers = 4;
  m.num_stages = 4;
  model::OptimizerOptions opt;
  opt.peak_lr = 1e-2;
  opt.warmup_steps = 2;
  opt.total_steps = 32;
  model::AveragingOptions a;
  a.outer_every = kH;
  a.outer_lr = 0.7;
  a.outer_momentum = 0.9;
  a.overlap = overlap;
  auto data =
      SamplerDataSource::Create(s->corpus.train, {.samples_per_mb = 2, .seq_len = 8, .seed = 3});
  CHECK(data.ok()) << data.status();
  s->data = std::move(data).value();
  TestSwarmOptions o;
  o.node_stages = {{0}, {0}, {1}, {1}, {2}, {2}, {3}, {3}};
  o.num_stages = 4;
  o.driver.mbs_per_iteration = 2;
  s->swarm = std::make_unique<TestSwarm>(
      o,
      [m, opt, a](int, int stage, common::Clock*, TaskRunner* runner) {
        TorchStageCompute::Options c;
        c.model = m;
        c.stage = stage;
        c.optimizer = opt;
        c.averaging = a;
        auto compute = TorchStageCompute::Create(c, runner);
        CHECK(compute.ok()) << compute.status();
        return std::unique_ptr<StageCompute>(
            std::make_unique<SyncRecorder>(*std::move(compute)));
      },
      s->data.get());
  return s;
}

const StageStep& Step(TestSwarm& swarm, int node, int iteration) {
  return swarm.reports(node)[iteration].stages.at(1);
}

// Iterations kH-1, 2kH-1, ...: the syncs (step() % kH == 0 after them).
bool IsSync(int iteration) { return (iteration + 1) % kH == 0; }

// The replicas agree at every sync in [from, to): without overlap their
// parameters are equal after it; with overlap (Note [Overlapped sync]) the
// anchors they sent agree (the parameters meet where a Run ends on a sync).
void ExpectAgreeAtSyncs(TestSwarm& swarm, int from, int to, bool overlap) {
  for (int i = from; i < to; ++i) {
    if (!IsSync(i)) continue;
    EXPECT_TRUE(Step(swarm, kPaused, i).digests_agree) << "iteration " << i;
    EXPECT_TRUE(Step(swarm, kReplica, i).digests_agree) << "iteration " << i;
    if (overlap) continue;
    EXPECT_EQ(Step(swarm, kPaused, i).digest_after, Step(swarm, kReplica, i).digest_after)
        << "iteration " << i;
  }
}

class PausedOuterStepsTest : public ::testing::TestWithParam<bool> {};

TEST_P(PausedOuterStepsTest, PausedDuringInnerStepsAndResumedMatchesItsReplicaAfterEverySync) {
  const bool overlap = GetParam();
  std::unique_ptr<Swarm> s = MakeSwarm(overlap);
  TestSwarm& swarm = *s->swarm;
  ASSERT_TRUE(swarm.Run(2));  // inner steps 0, 1 of round 0 with visits
  EXPECT_GT(Step(swarm, kPaused, 1).visits_here, 0);
  swarm.SetPaused(kPaused, true);
  ASSERT_TRUE(swarm.Run(4));  // 2, 3 (sync), 4, 5 paused
  swarm.SetPaused(kPaused, false);
  ASSERT_TRUE(swarm.Run(6));  // 6, 7 (sync) resumed, ..., 11 (sync)
  for (int i = 2; i < 6; ++i) EXPECT_EQ(Step(swarm, kPaused, i).visits_here, 0) << i;
  EXPECT_GT(Step(swarm, kPaused, 6).visits_here + Step(swarm, kPaused, 7).visits_here, 0);
  // It trained in round 0 before its pause: its pseudo-gradient counts.
  if (!overlap) {
    EXPECT_EQ(Step(swarm, kPaused, 3).visits_total, 2);
  }
  ExpectAgreeAtSyncs(swarm, 0, 12, overlap);
  for (int i = 0; i < 12; ++i) {
    EXPECT_TRUE(swarm.reports(kPaused)[i].status.ok()) << swarm.reports(kPaused)[i].status;
  }
  EXPECT_EQ(swarm.compute(kPaused, 1)->ParamsDigest(), swarm.compute(kReplica, 1)->ParamsDigest());
}

// Paused for all of round 1 (iterations 4..7): it moved nothing since its
// anchor, so it sends zeros with no visit and the outer step is its
// replica's pseudo-gradient alone (it used to be averaged with a zero,
// halving the step); it applies the same step and stays equal. With
// overlap the round is applied at iteration 9, where the Run ends.
TEST_P(PausedOuterStepsTest, ReplicaPausedForAWholeRoundAddsNoWeightButTakesTheStep) {
  const bool overlap = GetParam();
  std::unique_ptr<Swarm> s = MakeSwarm(overlap);
  TestSwarm& swarm = *s->swarm;
  ASSERT_TRUE(swarm.Run(kH));  // ends on a sync: a full one with overlap too
  swarm.SetPaused(kPaused, true);
  ASSERT_TRUE(swarm.Run(kH + 2));  // 4..9; the sync at 7
  const int sync = 2 * kH - 1;
  for (int i = kH; i <= sync; ++i) EXPECT_EQ(Step(swarm, kPaused, i).visits_here, 0) << i;
  SyncRecorder* paused = s->recorder(kPaused);
  SyncRecorder* replica = s->recorder(kReplica);
  ASSERT_NE(paused, nullptr);
  ASSERT_NE(replica, nullptr);
  ASSERT_TRUE(paused->sent.has_value());
  ASSERT_TRUE(replica->sent.has_value());
  EXPECT_TRUE(paused->sent->idle);
  EXPECT_FALSE(replica->sent->idle);
  for (float x : paused->sent->flat) ASSERT_EQ(x, 0.f);
  EXPECT_EQ(replica->applied_contributors, 1);
  EXPECT_EQ(replica->applied_sum, replica->sent->flat);  // its own, undiluted
  EXPECT_EQ(paused->applied_contributors, 1);
  EXPECT_EQ(paused->applied_sum, replica->sent->flat);
  if (!overlap) {
    EXPECT_EQ(Step(swarm, kPaused, sync).replicas, 2);  // still in the round
    EXPECT_EQ(Step(swarm, kPaused, sync).visits_total, 1);
    EXPECT_TRUE(Step(swarm, kPaused, sync).outer_step);
  }
  ExpectAgreeAtSyncs(swarm, 0, 2 * kH, overlap);
  swarm.SetPaused(kPaused, false);
  ASSERT_TRUE(swarm.Run(kH + 2));  // 10..15, ends on a sync
  int64_t resumed_visits = 0;
  for (int i = 10; i < 16; ++i) resumed_visits += Step(swarm, kPaused, i).visits_here;
  EXPECT_GT(resumed_visits, 0);
  EXPECT_EQ(replica->applied_contributors, 2);
  ExpectAgreeAtSyncs(swarm, 0, 16, overlap);
  EXPECT_EQ(swarm.compute(kPaused, 1)->ParamsDigest(), swarm.compute(kReplica, 1)->ParamsDigest());
}

INSTANTIATE_TEST_SUITE_P(Sync, PausedOuterStepsTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? std::string("Overlapped") : std::string("Waited");
                         });

}  // namespace
}  // namespace skipswarm::node
