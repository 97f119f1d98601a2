// Note [Exactness]: the distributed run (real servers, drivers, averaging,
// in-process transport, libtorch compute) must train exactly like the
// single-process reference trainer given the same model, optimiser, seed
// and data order (Note [Data order]): loss per iteration within 1e-4
// relative.
//
// Real processes (`skipswarm local`: 2 data nodes + 5 stages x
// 2 replicas = 12 `skipswarm node` processes over gRPC, default model,
// against `skipswarm train-ref --mbs_per_iteration=8 --threads=1`, same
// iteration count): with --threads=1 everywhere the loss matches to max
// 3.4e-7 relative over 40 iterations; with the default --threads=0 (2
// intra-op threads here) to 1.2e-5. Differences of that size are float
// summation order, amplified by training: a replica adds its MBs'
// gradients in arrival order (not fixed across processes) and BLAS's
// reduction order follows the thread count. Two 150-iteration runs with
// identical flags agree exactly to iteration 40, then differ by 3.5e-7
// (it 45), 2.4e-6 (60), 2.2e-5 (85); threads 1 vs 2 differ alike. Larger
// gaps come from dropped MBs (each drop changes that iteration's batch):
// in one such run at load ~15 a group Health probe timed out, a relay
// marked live data node d0 dead and from iteration 96 stopped sending its
// backward frames (2, later 6 MBs dropped per iteration): the loss moved
// by 0.6-7% from then on. That is the likely cause of the old report (1e-5
// to iteration 32, then 0.86%); since commit 86d0f41 a probe must fail 3
// times and backward frames are always sent, and the same run had no drop
// in all 150 iterations (--local_iterations=150 --threads=1).
#include <cmath>
#include <memory>

#include "gtest/gtest.h"
#include "model/reference_trainer.h"
#include "node/compute/torch_stage_compute.h"
#include "node/train/sampler_data_source.h"
#include "node/train/test_swarm.h"

namespace skipswarm::node {
namespace {

constexpr int kIterations = 50;

model::Corpus TinyCorpus() {
  model::Corpus c;
  for (int i = 0; i < 5000; ++i) c.train.push_back((i * 7 + i / 13) % 32);
  for (int i = 0; i < 500; ++i) c.validation.push_back((i * 7 + i / 13) % 32);
  return c;
}

model::TrainerOptions ReferenceOptions(int mbs) {
  model::TrainerOptions o;
  o.model.num_layers = 4;
  o.model.d_model = 16;
  o.model.num_heads = 2;
  o.model.ffn_dim = 24;
  o.model.vocab_size = 32;
  o.model.seq_len = 8;
  o.model.num_stages = 4;
  o.model.init_seed = 11;
  o.optimizer.peak_lr = 1e-2;
  o.optimizer.warmup_steps = 5;
  o.optimizer.total_steps = kIterations;
  o.mbs_per_iteration = mbs;
  o.samples_per_mb = 2;
  o.seed = 3;
  return o;
}

std::vector<double> ReferenceLosses(const model::Corpus& corpus, int mbs) {
  auto trainer = model::ReferenceTrainer::Create(ReferenceOptions(mbs), corpus);
  EXPECT_TRUE(trainer.ok()) << trainer.status();
  std::vector<double> losses;
  for (int i = 0; i < kIterations; ++i) {
    auto stats = (*trainer)->RunIteration();
    EXPECT_TRUE(stats.ok()) << stats.status();
    losses.push_back(stats->loss);
  }
  return losses;
}

ComputeFactory Torch(const model::TrainerOptions& ref) {
  return [ref](int, int stage, common::Clock*, TaskRunner* runner) {
    TorchStageCompute::Options o;
    o.model = ref.model;
    o.stage = stage;
    o.optimizer = ref.optimizer;
    auto c = TorchStageCompute::Create(o, runner);
    CHECK(c.ok()) << c.status();
    return std::unique_ptr<StageCompute>(*std::move(c));
  };
}

// Mean over the data nodes of their iteration losses (each a mean over M MBs).
std::vector<double> SwarmLosses(TestSwarm& swarm, const std::vector<int>& data_nodes) {
  std::vector<double> losses(kIterations, 0.0);
  for (int d : data_nodes) {
    const auto& reports = swarm.reports(d);
    EXPECT_EQ(reports.size(), static_cast<size_t>(kIterations));
    for (size_t i = 0; i < reports.size() && i < losses.size(); ++i) {
      EXPECT_TRUE(reports[i].status.ok()) << reports[i].status;
      EXPECT_EQ(reports[i].data->dropped, 0);
      losses[i] += reports[i].data->loss / data_nodes.size();
    }
  }
  return losses;
}

void ExpectClose(const std::vector<double>& got, const std::vector<double>& want) {
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double rel = std::abs(got[i] - want[i]) / std::abs(want[i]);
    worst = std::max(worst, rel);
    EXPECT_LT(rel, 1e-4) << "iteration " << i << ": swarm " << got[i] << " reference " << want[i];
  }
  std::cout << "iterations " << want.size() << ", loss " << want.front() << " -> " << want.back()
            << ", max relative difference " << worst << "\n";
}

TEST(ExactnessTest, OneDataNodeOneReplicaPerStageMatchesReference) {
  model::Corpus corpus = TinyCorpus();
  const int mbs = 3;
  model::TrainerOptions ref = ReferenceOptions(mbs);
  std::vector<double> want = ReferenceLosses(corpus, mbs);

  model::SamplerOptions s{.samples_per_mb = ref.samples_per_mb, .seq_len = ref.model.seq_len,
                          .seed = ref.seed};
  auto data = SamplerDataSource::Create(corpus.train, s);
  ASSERT_TRUE(data.ok());
  TestSwarmOptions o;
  o.node_stages = {{0}, {1}, {2}, {3}};
  o.num_stages = 4;
  o.driver.mbs_per_iteration = mbs;
  TestSwarm swarm(o, Torch(ref), data->get());
  ASSERT_TRUE(swarm.Run(kIterations));
  ExpectClose(SwarmLosses(swarm, {0}), want);
}

TEST(ExactnessTest, TwoDataNodesTwoReplicasMatchReferenceAtGlobalBatch) {
  model::Corpus corpus = TinyCorpus();
  const int mbs = 2;  // per data node; the reference runs 2 x 2 per iteration
  model::TrainerOptions ref = ReferenceOptions(2 * mbs);
  std::vector<double> want = ReferenceLosses(corpus, 2 * mbs);

  model::SamplerOptions s{.samples_per_mb = ref.samples_per_mb, .seq_len = ref.model.seq_len,
                          .seed = ref.seed};
  auto data = SamplerDataSource::Create(corpus.train, s);
  ASSERT_TRUE(data.ok());
  TestSwarmOptions o;
  o.node_stages = {{0}, {0}, {1}, {1}, {2}, {2}, {3}, {3}};
  o.num_stages = 4;
  o.driver.mbs_per_iteration = mbs;
  TestSwarm swarm(o, Torch(ref), data->get());
  ASSERT_TRUE(swarm.Run(kIterations));
  ExpectClose(SwarmLosses(swarm, {0, 1}), want);
  for (int stage = 0; stage < 4; ++stage) {
    EXPECT_EQ(swarm.compute(2 * stage, stage)->ParamsDigest(),
              swarm.compute(2 * stage + 1, stage)->ParamsDigest())
        << "stage " << stage;
  }
}

}  // namespace
}  // namespace skipswarm::node
