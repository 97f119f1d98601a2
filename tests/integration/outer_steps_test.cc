// Note [Outer steps] (node/train/node_trainer.h) on real libtorch computes
// in an in-process swarm of 2 data nodes and 2 replicas of every other
// stage: DiLoCo-style syncs every H iterations leave the replicas equal
// and average nothing in between; compressed averaging (H = 1) keeps the
// replicas equal every iteration; state transfer and checkpoint
// generations carry the averaging state (Note [Averaging state]). H = 1 with fp32 is exactness_test's.
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "gtest/gtest.h"
#include "model/averaging_options.h"
#include "model/checkpoint.h"
#include "model/checkpoint_generation.h"
#include "model/model_config.h"
#include "model/optimizer_options.h"
#include "model/tiny_config.h"
#include "node/compute/torch_stage_compute.h"
#include "node/train/sampler_data_source.h"
#include "node/train/test_swarm.h"

namespace skipswarm::node {
namespace {

model::Corpus TinyCorpus() {
  model::Corpus c;
  for (int i = 0; i < 5000; ++i) c.train.push_back((i * 7 + i / 13) % 32);
  for (int i = 0; i < 500; ++i) c.validation.push_back((i * 7 + i / 13) % 32);
  return c;
}

model::ModelConfig TinyModel() {
  model::ModelConfig m = model::testing::TinyConfig();
  m.num_layers = 4;
  m.num_stages = 4;
  return m;
}

struct TrainedSwarm {
  std::unique_ptr<TestSwarm> swarm;
  std::unique_ptr<SamplerDataSource> data;
};

// Nodes 0, 1: stage 0; nodes 2s, 2s+1: stage s.
TrainedSwarm Train(const model::AveragingOptions& averaging, int iterations,
                   std::map<int, absl::Duration> reduce_delay = {},
                   std::set<uint64_t> delayed_iterations = {},
                   std::function<void(TestSwarmOptions*)> layout = nullptr,
                   int run_now = -1) {
  const model::ModelConfig m = TinyModel();
  model::OptimizerOptions opt;
  opt.peak_lr = 1e-2;
  opt.warmup_steps = 5;
  opt.total_steps = iterations;
  TrainedSwarm run;
  static const model::Corpus* corpus = new model::Corpus(TinyCorpus());
  auto data = SamplerDataSource::Create(corpus->train, {.samples_per_mb = 2, .seq_len = 8, .seed = 3});
  CHECK(data.ok());
  run.data = std::move(data).value();
  TestSwarmOptions o;
  o.node_stages = {{0}, {0}, {1}, {1}, {2}, {2}, {3}, {3}};
  o.num_stages = 4;
  o.driver.mbs_per_iteration = 2;
  o.reduce_delay = std::move(reduce_delay);
  o.reduce_delay_iterations = std::move(delayed_iterations);
  if (layout) layout(&o);
  run.swarm = std::make_unique<TestSwarm>(
      o,
      [m, opt, averaging](int, int stage, common::Clock*, TaskRunner* runner) {
        TorchStageCompute::Options c;
        c.model = m;
        c.stage = stage;
        c.optimizer = opt;
        c.averaging = averaging;
        auto compute = TorchStageCompute::Create(c, runner);
        CHECK(compute.ok()) << compute.status();
        return std::unique_ptr<StageCompute>(*std::move(compute));
      },
      run.data.get());
  // run_now >= 0: the caller runs the rest (same schedule).
  EXPECT_TRUE(run.swarm->Run(run_now >= 0 ? run_now : iterations));
  return run;
}

double MeanLoss(const TestSwarm& swarm, int from, int to) {
  double sum = 0;
  int n = 0;
  for (int d : {0, 1}) {
    for (int i = from; i < to; ++i) {
      sum += swarm.reports(d)[i].data->loss;
      ++n;
    }
  }
  return sum / n;
}

TEST(OuterStepsTest, ReplicasAverageOnlyEveryHStepsAndAgreeAfterEachSync) {
  model::AveragingOptions a;
  a.outer_every = 4;
  a.outer_lr = 0.7;
  a.outer_momentum = 0.9;
  constexpr int kIterations = 24;
  TrainedSwarm run = Train(a, kIterations, {}, {}, nullptr, kIterations - 2);
  TestSwarm& swarm = *run.swarm;
  // Between syncs the replicas train on their own micro-batches: two inner
  // steps after the sync of iteration 19 their parameters differ.
  for (int stage = 0; stage < 4; ++stage) {
    EXPECT_NE(swarm.compute(2 * stage, stage)->ParamsDigest(),
              swarm.compute(2 * stage + 1, stage)->ParamsDigest())
        << "stage " << stage;
  }
  ASSERT_TRUE(swarm.Run(2));
  for (int stage = 0; stage < 4; ++stage) {
    const int r0 = 2 * stage, r1 = 2 * stage + 1;
    const int64_t n = swarm.compute(r0, stage)->num_params();
    ASSERT_EQ(swarm.reports(r0).size(), static_cast<size_t>(kIterations));
    for (int i = 0; i < kIterations; ++i) {
      const StageStep& s0 = swarm.reports(r0)[i].stages.at(stage);
      const StageStep& s1 = swarm.reports(r1)[i].stages.at(stage);
      EXPECT_TRUE(swarm.reports(r0)[i].status.ok()) << swarm.reports(r0)[i].status;
      const bool sync = (i + 1) % 4 == 0;
      EXPECT_EQ(s0.outer_step, sync) << "stage " << stage << " iteration " << i;
      EXPECT_EQ(s0.avg_bytes, sync ? 4 * n : 0);
      if (sync) {
        EXPECT_EQ(s0.replicas, 2);
        EXPECT_TRUE(s0.digests_agree);
        EXPECT_EQ(s0.digest_after, s1.digest_after) << "stage " << stage << " iteration " << i;
        EXPECT_NE(s0.digest_after, 0u) << "stage " << stage << " iteration " << i;
      } else {
        // Note [Digest on demand] (node/train/node_trainer.h): nothing
        // compares the replicas between syncs, so no digest is taken.
        EXPECT_EQ(s0.digest_after, 0u) << "stage " << stage << " iteration " << i;
        EXPECT_EQ(s1.digest_after, 0u) << "stage " << stage << " iteration " << i;
      }
    }
  }
  EXPECT_LT(MeanLoss(swarm, kIterations - 4, kIterations), MeanLoss(swarm, 0, 4));
}

// Note [Lone outer replica] (node/train/node_trainer.cc): one replica per
// stage, so each syncs without the group's round and takes no digest; the
// parameters and losses are the round path's (always_round) to the byte,
// with plain and overlapped syncs, ending two inner steps after a sync.
TEST(OuterStepsTest, ALoneReplicaSyncsWithoutTheRoundToTheSameBytes) {
  for (bool overlap : {false, true}) {
    SCOPED_TRACE(overlap ? "overlapped" : "plain");
    model::AveragingOptions a;
    a.outer_every = 4;
    a.outer_lr = 0.7;
    a.outer_momentum = 0.9;
    a.overlap = overlap;
    constexpr int kIterations = 10;
    auto lone = [](bool always_round) {
      return [always_round](TestSwarmOptions* o) {
        o->node_stages = {{0}, {1}, {2}, {3}};
        o->always_round = always_round;
      };
    };
    TrainedSwarm local = Train(a, kIterations, {}, {}, lone(false));
    TrainedSwarm round = Train(a, kIterations, {}, {}, lone(true));
    for (int stage = 0; stage < 4; ++stage) {
      ASSERT_EQ(local.swarm->reports(stage).size(), static_cast<size_t>(kIterations));
      ASSERT_EQ(round.swarm->reports(stage).size(), static_cast<size_t>(kIterations));
      int outer_steps = 0;
      for (int i = 0; i < kIterations; ++i) {
        const StageStep& l = local.swarm->reports(stage)[i].stages.at(stage);
        const StageStep& r = round.swarm->reports(stage)[i].stages.at(stage);
        EXPECT_EQ(l.outer_step, r.outer_step) << "stage " << stage << " iteration " << i;
        EXPECT_EQ(l.digest_after, 0u) << "stage " << stage << " iteration " << i;
        // The round path digests after each sync (iterations 3 and 7).
        EXPECT_EQ(r.digest_after != 0, (i + 1) % 4 == 0) << "stage " << stage << " iteration " << i;
        outer_steps += l.outer_step ? 1 : 0;
      }
      EXPECT_EQ(outer_steps, 2) << "stage " << stage;
      EXPECT_EQ(local.swarm->compute(stage, stage)->ParamsDigest(),
                round.swarm->compute(stage, stage)->ParamsDigest())
          << "stage " << stage;
    }
    for (int i = 0; i < kIterations; ++i) {
      EXPECT_EQ(local.swarm->reports(0)[i].data->loss, round.swarm->reports(0)[i].data->loss)
          << "iteration " << i;
    }
  }
}

// Note [Overlapped sync]: a round is applied at the next sync (one round
// late) with every replica's anchor agreeing, nothing waits in between, and
// the last iteration syncs in full, so the run ends with equal replicas.
TEST(OuterStepsTest, OverlappedSyncAppliesEachRoundOneRoundLateAndEndsEqual) {
  model::AveragingOptions a;
  a.outer_every = 4;
  a.outer_lr = 1;
  a.outer_momentum = 0;
  a.overlap = true;
  constexpr int kIterations = 24;
  TrainedSwarm run = Train(a, kIterations);
  TestSwarm& swarm = *run.swarm;
  for (int stage = 0; stage < 4; ++stage) {
    const int r0 = 2 * stage, r1 = 2 * stage + 1;
    const int64_t n = swarm.compute(r0, stage)->num_params();
    ASSERT_EQ(swarm.reports(r0).size(), static_cast<size_t>(kIterations));
    for (int i = 0; i < kIterations; ++i) {
      const StageStep& s0 = swarm.reports(r0)[i].stages.at(stage);
      EXPECT_TRUE(swarm.reports(r0)[i].status.ok()) << swarm.reports(r0)[i].status;
      const bool sync = (i + 1) % 4 == 0;
      const bool applied = sync && i >= 7;  // iteration 3 only starts a round
      EXPECT_EQ(s0.outer_step, applied) << "stage " << stage << " iteration " << i;
      // A round's bytes are reported when it is applied; the last iteration
      // also syncs its own round in full.
      EXPECT_EQ(s0.avg_bytes, !applied ? 0 : i == kIterations - 1 ? 8 * n : 4 * n)
          << "stage " << stage << " iteration " << i;
      if (applied) {
        EXPECT_EQ(s0.replicas, 2);
        EXPECT_TRUE(s0.digests_agree) << "stage " << stage << " iteration " << i;
      }
    }
    EXPECT_EQ(swarm.compute(r0, stage)->ParamsDigest(), swarm.compute(r1, stage)->ParamsDigest())
        << "stage " << stage;
  }
  EXPECT_LT(MeanLoss(swarm, kIterations - 4, kIterations), MeanLoss(swarm, 0, 4));
}

// Note [Late members] (node/train/sharded_reduce.h): node 5 (stage 2's
// second replica) reaches the group 5 s (simulated) after its sync; the
// round closes at the 1 s deadline without it, its peer steps on its own
// pseudo-gradient, and node 5 applies that same average when its call
// arrives: both end every sync on the same anchor, and each sync counts one
// member left out and one late.
TEST(OuterStepsTest, ALateReplicaIsLeftOutAtTheDeadlineAndAppliesTheAverageItMissed) {
  model::AveragingOptions a;
  a.outer_every = 4;
  a.outer_lr = 1;
  a.outer_momentum = 0;
  a.sync_deadline_factor = 4;
  a.sync_deadline_min_s = 1;  // no uplink figures in process: the floor
  constexpr int kIterations = 12;
  TrainedSwarm run = Train(a, kIterations, {{5, absl::Seconds(5)}});
  TestSwarm& swarm = *run.swarm;
  for (int stage = 0; stage < 4; ++stage) {
    const int r0 = 2 * stage, r1 = 2 * stage + 1;
    ASSERT_EQ(swarm.reports(r1).size(), static_cast<size_t>(kIterations));
    for (int i = 3; i < kIterations; i += 4) {
      const StageStep& s0 = swarm.reports(r0)[i].stages.at(stage);
      const StageStep& s1 = swarm.reports(r1)[i].stages.at(stage);
      EXPECT_TRUE(s0.outer_step && s1.outer_step) << "stage " << stage << " iteration " << i;
      EXPECT_EQ(s0.digest_after, s1.digest_after) << "stage " << stage << " iteration " << i;
      EXPECT_EQ(s0.sync_left_out, stage == 2 ? 1 : 0) << "stage " << stage << " iteration " << i;
      EXPECT_FALSE(s0.sync_late);
      EXPECT_EQ(s1.sync_late, stage == 2) << "stage " << stage << " iteration " << i;
      EXPECT_EQ(s0.replicas, stage == 2 ? 1 : 2);
      EXPECT_FALSE(s1.resynced);
    }
  }
  EXPECT_LT(MeanLoss(swarm, kIterations - 4, kIterations), MeanLoss(swarm, 0, 4));
}

// Note [Late members], a late member whose pseudo-gradient comes after the
// deadline: node 5 (stage 2's second replica) reaches the first sync
// (iteration 3) 5 s late, the later ones on time. The round closes at 1 s
// without it; its contribution, when it comes, is mixed into nothing: it
// takes its peer's step (its own pseudo-gradient of that round is dropped,
// so stage 2 leaves that sync unlike the on-time run while the other stages
// match it), and at the next syncs both replicas average in full from the
// same anchor, with equal digests and no re-sync. Without the deadline
// (factor 0) the first sync waits for it and leaves nobody out.
TEST(OuterStepsTest, AReplicaLateOnceIsLeftOutThenRejoinsWithEqualDigests) {
  model::AveragingOptions a;
  a.outer_every = 4;
  a.outer_lr = 1;
  a.outer_momentum = 0;
  a.sync_deadline_factor = 4;
  a.sync_deadline_min_s = 1;  // no uplink figures in process: the floor
  constexpr int kIterations = 12;
  TrainedSwarm on_time = Train(a, kIterations);
  TrainedSwarm run = Train(a, kIterations, {{5, absl::Seconds(5)}}, {3});
  TestSwarm& swarm = *run.swarm;
  for (int stage = 0; stage < 4; ++stage) {
    const int r0 = 2 * stage, r1 = 2 * stage + 1;
    ASSERT_EQ(swarm.reports(r1).size(), static_cast<size_t>(kIterations));
    for (int i = 3; i < kIterations; i += 4) {
      const bool left_out = stage == 2 && i == 3;
      const StageStep& s0 = swarm.reports(r0)[i].stages.at(stage);
      const StageStep& s1 = swarm.reports(r1)[i].stages.at(stage);
      EXPECT_TRUE(swarm.reports(r1)[i].status.ok()) << swarm.reports(r1)[i].status;
      EXPECT_TRUE(s0.outer_step && s1.outer_step) << "stage " << stage << " iteration " << i;
      EXPECT_EQ(s0.digest_after, s1.digest_after) << "stage " << stage << " iteration " << i;
      EXPECT_EQ(s0.sync_left_out, left_out ? 1 : 0) << "stage " << stage << " iteration " << i;
      EXPECT_EQ(s1.sync_left_out, 0) << "stage " << stage << " iteration " << i;
      EXPECT_FALSE(s0.sync_late);
      EXPECT_EQ(s1.sync_late, left_out) << "stage " << stage << " iteration " << i;
      EXPECT_EQ(s0.replicas, left_out ? 1 : 2) << "stage " << stage << " iteration " << i;
      EXPECT_EQ(s1.replicas, left_out ? 1 : 2) << "stage " << stage << " iteration " << i;
      EXPECT_TRUE(s0.digests_agree && s1.digests_agree) << "stage " << stage << " iteration " << i;
      EXPECT_FALSE(s0.resynced || s1.resynced) << "stage " << stage << " iteration " << i;
    }
    // The first sync: only stage 2 lost a pseudo-gradient.
    EXPECT_EQ(swarm.reports(r0)[3].stages.at(stage).digest_after ==
                  on_time.swarm->reports(r0)[3].stages.at(stage).digest_after,
              stage != 2)
        << "stage " << stage;
    EXPECT_EQ(swarm.compute(r0, stage)->ParamsDigest(), swarm.compute(r1, stage)->ParamsDigest())
        << "stage " << stage;
  }
  EXPECT_LT(MeanLoss(swarm, kIterations - 4, kIterations), MeanLoss(swarm, 0, 4));
}

// Note [Sync wait] (node/train/node_trainer.h): node 5 (stage 2's second
// replica) reaches the hub 2 s (simulated) after each of its syncs, and
// nobody is closed out (deadline factor 0). Waited for, both stage-2
// replicas' syncs report the 2 s; with --outer_overlap a sync point waits
// only for what the H steps since the round started did not cover (less
// than 2 s; the last iteration also syncs in full), and the other stages,
// whose rounds end within their H steps, report no wait at all. Inner
// steps never wait.
TEST(OuterStepsTest, SyncWaitIsTheTimeASyncPointWaitsForASlowMember) {
  constexpr int kIterations = 12;
  const absl::Duration kDelay = absl::Seconds(2);
  const absl::Duration kSlack = absl::Milliseconds(50);
  for (const bool overlap : {false, true}) {
    SCOPED_TRACE(overlap ? "overlap" : "waited for");
    model::AveragingOptions a;
    a.outer_every = 4;
    a.outer_lr = 1;
    a.outer_momentum = 0;
    a.overlap = overlap;
    a.sync_deadline_factor = 0;  // wait for every member
    TrainedSwarm run = Train(a, kIterations, {{5, kDelay}});
    TestSwarm& swarm = *run.swarm;
    for (int stage = 0; stage < 4; ++stage) {
      for (const int node : {2 * stage, 2 * stage + 1}) {
        ASSERT_EQ(swarm.reports(node).size(), static_cast<size_t>(kIterations));
        for (int i = 0; i < kIterations; ++i) {
          const absl::Duration wait = swarm.reports(node)[i].stages.at(stage).sync_wait;
          const std::string where = absl::StrCat("stage ", stage, " node ", node, " it ", i);
          EXPECT_GE(wait, absl::ZeroDuration()) << where;
          if ((i + 1) % 4 != 0) {
            EXPECT_EQ(wait, absl::ZeroDuration()) << where;  // an inner step
          } else if (stage != 2) {
            EXPECT_LT(wait, kSlack) << where;
            if (overlap && i != kIterations - 1) {
              EXPECT_EQ(wait, absl::ZeroDuration()) << where;
            }
          } else if (!overlap) {
            EXPECT_GE(wait, kDelay - kSlack) << where;
            EXPECT_LE(wait, kDelay + kSlack) << where;
          } else if (i == 3) {
            EXPECT_EQ(wait, absl::ZeroDuration()) << where;  // only starts a round
          } else if (i < kIterations - 1) {
            EXPECT_GT(wait, absl::ZeroDuration()) << where;
            EXPECT_LT(wait, kDelay) << where;  // the H steps covered part of it
          } else {
            // The round of iteration 7, then the last sync in full.
            EXPECT_GT(wait, kDelay) << where;
            EXPECT_LT(wait, 2 * kDelay) << where;
          }
        }
      }
    }
  }
}

TEST(OuterStepsTest, CompressedGradientAveragingKeepsReplicasEqual) {
  for (const char* codec : {"int8", "topk:0.1"}) {
    model::AveragingOptions a;
    a.codec = *model::ParseAvgCodec(codec);
    constexpr int kIterations = 20;
    TrainedSwarm run = Train(a, kIterations);
    TestSwarm& swarm = *run.swarm;
    for (int stage = 0; stage < 4; ++stage) {
      const int64_t n = swarm.compute(2 * stage, stage)->num_params();
      for (int i = 0; i < kIterations; ++i) {
        const StageStep& s0 = swarm.reports(2 * stage)[i].stages.at(stage);
        EXPECT_TRUE(s0.digests_agree) << codec << " stage " << stage << " iteration " << i;
        EXPECT_EQ(s0.avg_bytes,
                  static_cast<int64_t>(model::AveragedBytes(a.codec, static_cast<double>(n))));
      }
      EXPECT_EQ(swarm.compute(2 * stage, stage)->ParamsDigest(),
                swarm.compute(2 * stage + 1, stage)->ParamsDigest())
          << codec << " stage " << stage;
    }
    EXPECT_LT(MeanLoss(swarm, kIterations - 4, kIterations), MeanLoss(swarm, 0, 4)) << codec;
  }
}

// Note [Averaging state]: a replica that imports a peer's state between
// syncs continues from the same anchor, momentum and residual, so its next
// pseudo-gradient is the peer's.
TEST(OuterStepsTest, StateTransferCarriesTheAveragingState) {
  model::AveragingOptions a;
  a.outer_every = 4;
  a.codec = *model::ParseAvgCodec("topk:0.2");
  TrainedSwarm run = Train(a, 10);  // two syncs done, two inner steps since
  TestSwarm& swarm = *run.swarm;
  StageCompute* source = swarm.compute(4, 2);
  StageCompute* joiner = swarm.compute(5, 2);
  absl::StatusOr<std::string> state = source->ExportState();
  ASSERT_TRUE(state.ok()) << state.status();
  ASSERT_TRUE(joiner->ImportState(*state).ok());
  EXPECT_EQ(joiner->ParamsDigest(), source->ParamsDigest());
  absl::StatusOr<AverageContribution> g0 = source->TakePseudoGradient();
  absl::StatusOr<AverageContribution> g1 = joiner->TakePseudoGradient();
  ASSERT_TRUE(g0.ok() && g1.ok());
  EXPECT_EQ(g0->digest, g1->digest);
  EXPECT_EQ(g0->flat, g1->flat);  // same residual added, same entries kept
  EXPECT_EQ(g0->bytes, g1->bytes);
}

// Note [Averaging state]: stage checkpoints taken between syncs, kept as a
// checkpoint generation (model/checkpoint_generation.h), carry the anchor
// and the outer momentum, so a fresh compute that loads one takes exactly
// the outer step the uninterrupted replica takes.
TEST(OuterStepsTest, CheckpointGenerationCarriesTheOuterState) {
  model::AveragingOptions a;
  a.outer_every = 4;
  a.outer_lr = 0.7;
  a.outer_momentum = 0.9;
  TrainedSwarm run = Train(a, 10);  // two syncs (momentum set), two inner steps since
  TestSwarm& swarm = *run.swarm;
  const std::string dir = std::string(std::getenv("TEST_TMPDIR"));
  std::map<int, std::string> bytes;
  for (int stage = 0; stage < 4; ++stage) {
    const std::string path = absl::StrCat(dir, "/outer-stage-", stage, ".ckpt");
    ASSERT_TRUE(swarm.compute(2 * stage, stage)->SaveCheckpoint(path).ok());
    bytes[stage] = common::ReadFileBytes(path).value();
  }
  StageCompute* source = swarm.compute(4, 2);
  const std::string hash = TinyModel().ConfigHash();
  ASSERT_TRUE(model::WriteGeneration(dir + "/gens", source->step(), hash, 4, bytes, 1).ok());
  absl::StatusOr<model::FoundGeneration> g =
      model::FindNewestCompleteGeneration(dir + "/gens", hash, 4);
  ASSERT_TRUE(g.ok()) << g.status();
  const std::string path = g->StagePath(2);
  TorchStageCompute::Options c;
  c.model = TinyModel();
  c.stage = 2;
  c.averaging = a;
  ThreadTaskRunner runner;
  auto fresh = TorchStageCompute::Create(c, &runner);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  absl::StatusOr<int64_t> step = (*fresh)->LoadCheckpoint(path);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(*step, source->step());
  EXPECT_EQ((*fresh)->ParamsDigest(), source->ParamsDigest());
  absl::StatusOr<AverageContribution> g0 = source->TakePseudoGradient();
  absl::StatusOr<AverageContribution> g1 = (*fresh)->TakePseudoGradient();
  ASSERT_TRUE(g0.ok() && g1.ok());
  EXPECT_EQ(g0->digest, g1->digest);  // same anchor, same sync count
  EXPECT_EQ(g0->flat, g1->flat);
  // The next outer step, with the same (the group's) summed pseudo-gradient.
  ASSERT_TRUE(source->ApplyOuterStep(g0->flat, 1).ok());
  ASSERT_TRUE((*fresh)->ApplyOuterStep(g0->flat, 1).ok());
  EXPECT_EQ((*fresh)->ParamsDigest(), source->ParamsDigest());
}

}  // namespace
}  // namespace skipswarm::node
