// Throughput of one train-ref iteration (stage executors, hop-by-hop
// detach/stash, per-stage visit-weighted AdamW) against a plain libtorch
// loop over the same model (one autograd graph, one AdamW, one clip): the
// cost of the stage machinery. Default small model, 2 MBs x 4 x 128 tokens,
// one intra-op thread; items_per_second = tokens/s.
//
//   bazel build //model:train_benchmark
//   bazel-bin/model/train_benchmark --benchmark_repetitions=3
//       --benchmark_enable_random_interleaving=true
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <torch/optim/adamw.h>

#include "model/local_pipeline.h"
#include "model/optimizer.h"
#include "model/reference_trainer.h"
#include "model/route.h"

namespace skipswarm::model {
namespace {

Corpus SyntheticCorpus() {
  Corpus c;
  for (int i = 0; i < 200000; ++i) c.train.push_back((i * 31 + i / 7) % 256);
  return c;
}

TrainerOptions Options() {
  TrainerOptions o;
  o.mbs_per_iteration = 2;
  o.samples_per_mb = 4;
  return o;
}

void BM_TrainRefIteration(benchmark::State& state) {
  at::set_num_threads(1);
  Corpus corpus = SyntheticCorpus();
  auto trainer = ReferenceTrainer::Create(Options(), corpus).value();
  int64_t tokens = 0;
  for (auto _ : state) {
    IterationStats s = trainer->RunIteration().value();
    tokens += s.tokens;
  }
  state.SetItemsProcessed(tokens);
}

void BM_PlainLibtorchIteration(benchmark::State& state) {
  at::set_num_threads(1);
  Corpus corpus = SyntheticCorpus();
  TrainerOptions o = Options();
  auto pipe = LocalPipeline::Create(o.model).value();
  std::vector<StageModule*> modules;
  std::vector<at::Tensor> params;
  for (int s = 0; s < pipe->num_stages(); ++s) {
    modules.push_back(&pipe->stage(s).module());
    for (auto& p : modules.back()->parameters()) params.push_back(p);
  }
  torch::optim::AdamW adamw(params, torch::optim::AdamWOptions(1e-3).betas({0.9, 0.95}).weight_decay(0.1));
  SamplerOptions so;
  so.samples_per_mb = o.samples_per_mb;
  so.seq_len = o.model.seq_len;
  auto sampler = MicroBatchSampler::Create(corpus.train, so).value();
  const std::vector<int> route = FullRoute(o.model.num_stages);
  int64_t tokens = 0, mb = 0;
  for (auto _ : state) {
    for (int j = 0; j < o.mbs_per_iteration; ++j) {
      MicroBatch b = sampler->Get(mb++);
      at::Tensor loss = MonolithicLoss(modules, route, b.tokens, b.targets) / o.mbs_per_iteration;
      loss.backward();
      tokens += b.tokens.numel();
    }
    ClipGradNorm(params, 1.0);
    adamw.step();
    adamw.zero_grad();
  }
  state.SetItemsProcessed(tokens);
}

BENCHMARK(BM_TrainRefIteration)->Unit(benchmark::kMillisecond)->MinTime(8.0);
BENCHMARK(BM_PlainLibtorchIteration)->Unit(benchmark::kMillisecond)->MinTime(8.0);

}  // namespace
}  // namespace skipswarm::model
