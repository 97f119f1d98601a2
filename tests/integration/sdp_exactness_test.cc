// Subnetwork data parallelism, distributed vs reference (Note [Exactness]
// for the pipeline): four SDP nodes (real servers, drivers, trainers,
// in-process averaging, libtorch compute) hosting the keep-0.5
// subnetworks of a 6-stage model train exactly like train-ref --sdp with
// the same assignment: every node a data node whose routes stay on itself,
// per-stage averaging among the stage's hosts (Note [SDP averaging]), the
// workers numbered by Note [SDP worker order]. Backward masking adds the
// frozen copies of Note [SDP frozen stages], refreshed before every
// iteration: the test also reports their bytes and staleness.
#include <cmath>
#include <iostream>
#include <memory>

#include "gtest/gtest.h"
#include "model/reference_trainer.h"
#include "model/sdp_assignment.h"
#include "model/tiny_config.h"
#include "node/compute/torch_stage_compute.h"
#include "node/train/sampler_data_source.h"
#include "node/train/sdp_planner.h"
#include "node/train/test_swarm.h"

namespace skipswarm::node {
namespace {

constexpr int kIterations = 30;
constexpr int kWorkers = 4;
constexpr int kMbs = 2;  // per worker

model::Corpus TinyCorpus() {
  model::Corpus c;
  for (int i = 0; i < 5000; ++i) c.train.push_back((i * 7 + i / 13) % 32);
  for (int i = 0; i < 500; ++i) c.validation.push_back((i * 7 + i / 13) % 32);
  return c;
}

model::TrainerOptions ReferenceOptions(model::SdpMode mode) {
  model::TrainerOptions o;
  o.model = model::testing::TinyConfig();
  o.model.num_stages = 6;
  o.optimizer.peak_lr = 1e-2;
  o.optimizer.warmup_steps = 5;
  o.optimizer.total_steps = kIterations;
  o.mbs_per_iteration = kMbs;
  o.samples_per_mb = 2;
  o.seed = 3;
  o.sdp = {mode, kWorkers, 0.5};
  return o;
}

std::function<std::unique_ptr<StageCompute>(int, int, common::Clock*, TaskRunner*)> Torch(
    const model::TrainerOptions& ref, bool frozen) {
  return [ref, frozen](int, int stage, common::Clock*, TaskRunner* runner) {
    TorchStageCompute::Options o;
    o.model = ref.model;
    o.stage = stage;
    o.optimizer = ref.optimizer;
    o.frozen = frozen;
    auto c = TorchStageCompute::Create(o, runner);
    CHECK(c.ok()) << c.status();
    return std::unique_ptr<StageCompute>(*std::move(c));
  };
}

void RunAndCompare(model::SdpMode mode) {
  model::Corpus corpus = TinyCorpus();
  const model::TrainerOptions ref = ReferenceOptions(mode);
  auto trainer = model::ReferenceTrainer::Create(ref, corpus);
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  std::vector<double> want;
  for (int i = 0; i < kIterations; ++i) {
    auto stats = (*trainer)->RunIteration();
    ASSERT_TRUE(stats.ok()) << stats.status();
    want.push_back(stats->loss);
  }
  const model::SdpAssignment& a = (*trainer)->sdp_assignment();

  model::SamplerOptions s{.samples_per_mb = ref.samples_per_mb, .seq_len = ref.model.seq_len,
                          .seed = ref.seed};
  auto data = SamplerDataSource::Create(corpus.train, s);
  ASSERT_TRUE(data.ok());
  TestSwarmOptions o;
  // Nodes in reverse worker order: the planner must number them by their
  // subnetworks, not by their place or id (Note [SDP worker order]).
  for (int w = kWorkers - 1; w >= 0; --w) {
    o.node_stages.push_back(a.subnetworks[w]);
    if (mode == model::SdpMode::kBackward) {
      o.shadow_stages.push_back(model::StagesOutside(a.subnetworks[w], 6));
    }
  }
  o.num_stages = 6;
  // A memory slot holds one hop's activations until its backward: a route
  // through all 6 stages on one node needs 6 (backward masking).
  o.memory_slots = 8;
  o.driver.mbs_per_iteration = kMbs;
  o.planner = [mode] { return std::make_unique<SdpPlanner>(mode); };
  o.shadow_factory = Torch(ref, /*frozen=*/true);
  TestSwarm swarm(o, Torch(ref, /*frozen=*/false), data->get());
  ASSERT_TRUE(swarm.Run(kIterations));

  double worst = 0;
  for (int i = 0; i < kIterations; ++i) {
    double got = 0;
    for (int n = 0; n < kWorkers; ++n) {
      const auto& reports = swarm.reports(n);
      ASSERT_EQ(reports.size(), static_cast<size_t>(kIterations));
      ASSERT_TRUE(reports[i].status.ok()) << reports[i].status;
      ASSERT_EQ(reports[i].data->dropped, 0);
      got += reports[i].data->loss / kWorkers;
    }
    const double rel = std::abs(got - want[i]) / std::abs(want[i]);
    worst = std::max(worst, rel);
    EXPECT_LT(rel, 1e-4) << "iteration " << i << ": swarm " << got << " reference " << want[i];
  }
  // Every host of a stage holds the same weights (stage 0 and 5: all four).
  for (int n = 1; n < kWorkers; ++n) {
    EXPECT_EQ(swarm.compute(0, 0)->ParamsDigest(), swarm.compute(n, 0)->ParamsDigest());
    EXPECT_EQ(swarm.compute(0, 5)->ParamsDigest(), swarm.compute(n, 5)->ParamsDigest());
  }
  std::cout << "sdp " << model::SdpModeName(mode) << ": iterations " << kIterations << ", loss "
            << want.front() << " -> " << want.back() << ", max relative difference " << worst
            << "\n";
  if (mode == model::SdpMode::kBackward) {
    for (int n = 0; n < kWorkers; ++n) {
      const ShadowStats st = swarm.shadows(n)->stats();
      EXPECT_EQ(st.failures, 0);
      EXPECT_EQ(st.max_staleness, 0);
      EXPECT_EQ(st.refreshes, 3 * kIterations);  // 3 frozen stages per node
      std::cout << "node " << n << ": frozen-stage refreshes " << st.refreshes << ", "
                << st.bytes / kIterations << " bytes per iteration, max staleness "
                << st.max_staleness << "\n";
    }
  }
}

TEST(SdpExactnessTest, ForwardMaskingSwarmMatchesReference) {
  RunAndCompare(model::SdpMode::kForward);
}

TEST(SdpExactnessTest, BackwardMaskingSwarmMatchesReference) {
  RunAndCompare(model::SdpMode::kBackward);
}

}  // namespace
}  // namespace skipswarm::node
