// Throughput of one train-ref iteration (stage executors, hop-by-hop
// detach/stash, per-stage visit-weighted AdamW) against a plain libtorch
// loop over the same model (one autograd graph, one AdamW, one clip): the
// cost of the stage machinery. Default small model, 2 MBs x 4 x 128 tokens,
// one intra-op thread; items_per_second = tokens/s.
//
//   bazel build //model:train_benchmark
//   bazel-bin/model/train_benchmark --benchmark_filter=Paired
//
// Note [Paired overhead measurement]
// On a shared machine the speed of a core drifts by ±15% within seconds,
// more than the overhead we look for, so two benchmarks timed one after the
// other (even with --benchmark_enable_random_interleaving) compare
// different machines. BM_PairedOverhead instead runs the two loops in
// alternation inside one process, one iteration each per pair (the order
// flips every pair), times each on this thread's CPU clock (time spent
// descheduled does not count), and reports the median and the 10th/90th
// percentiles of the per-pair ratio train-ref / plain: a slow phase of the
// machine slows both halves of a pair alike. The plain and train-ref steps
// are separate noinline functions so `valgrind --tool=callgrind
// --toggle-collect=...` can count their instructions, a load-independent
// check (model/README.md gives the command).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <time.h>
#include <torch/optim/adamw.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

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

// The baseline: the same model and data as one autograd graph per MB.
class PlainLoop {
 public:
  explicit PlainLoop(const Corpus& corpus) : options_(Options()) {
    pipe_ = LocalPipeline::Create(options_.model).value();
    for (int s = 0; s < pipe_->num_stages(); ++s) {
      modules_.push_back(&pipe_->stage(s).module());
      for (auto& p : modules_.back()->parameters()) params_.push_back(p);
    }
    adamw_ = std::make_unique<torch::optim::AdamW>(
        params_, torch::optim::AdamWOptions(1e-3).betas({0.9, 0.95}).weight_decay(0.1));
    SamplerOptions so;
    so.samples_per_mb = options_.samples_per_mb;
    so.seq_len = options_.model.seq_len;
    sampler_ = MicroBatchSampler::Create(corpus.train, so).value();
    route_ = FullRoute(options_.model.num_stages);
  }

  // One iteration; returns its tokens.
  int64_t Step() {
    int64_t tokens = 0;
    for (int j = 0; j < options_.mbs_per_iteration; ++j) {
      MicroBatch b = sampler_->Get(mb_++);
      at::Tensor loss =
          MonolithicLoss(modules_, route_, b.tokens, b.targets) / options_.mbs_per_iteration;
      loss.backward();
      tokens += b.tokens.numel();
    }
    ClipGradNorm(params_, 1.0);
    adamw_->step();
    adamw_->zero_grad();
    return tokens;
  }

 private:
  TrainerOptions options_;
  std::unique_ptr<LocalPipeline> pipe_;
  std::vector<StageModule*> modules_;
  std::vector<at::Tensor> params_;
  std::unique_ptr<torch::optim::AdamW> adamw_;
  std::unique_ptr<MicroBatchSampler> sampler_;
  std::vector<int> route_;
  uint64_t mb_ = 0;
};

__attribute__((noinline)) int64_t TrainRefStep(ReferenceTrainer& trainer) {
  return trainer.RunIteration().value().tokens;
}

__attribute__((noinline)) int64_t PlainStep(PlainLoop& plain) { return plain.Step(); }

// This thread's CPU time in seconds (a measurement, not a clock the code
// acts on, so it is read here rather than through common/'s Clock).
double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

void BM_TrainRefIteration(benchmark::State& state) {
  at::set_num_threads(1);
  Corpus corpus = SyntheticCorpus();
  auto trainer = ReferenceTrainer::Create(Options(), corpus).value();
  int64_t tokens = 0;
  for (auto _ : state) tokens += TrainRefStep(*trainer);
  state.SetItemsProcessed(tokens);
}

void BM_PlainLibtorchIteration(benchmark::State& state) {
  at::set_num_threads(1);
  Corpus corpus = SyntheticCorpus();
  PlainLoop plain(corpus);
  int64_t tokens = 0;
  for (auto _ : state) tokens += PlainStep(plain);
  state.SetItemsProcessed(tokens);
}

// Note [Paired overhead measurement]. One benchmark iteration = one pair.
void BM_PairedOverhead(benchmark::State& state) {
  at::set_num_threads(1);
  Corpus corpus = SyntheticCorpus();
  auto trainer = ReferenceTrainer::Create(Options(), corpus).value();
  PlainLoop plain(corpus);
  // Warm-up (optimiser state, allocator caches), outside the Step functions
  // so callgrind's --toggle-collect counts only measured pairs.
  trainer->RunIteration().value();
  plain.Step();
  std::vector<double> ref_s, plain_s, ratio;
  int64_t tokens = 0;
  for (auto _ : state) {
    const bool ref_first = ratio.size() % 2 == 0;
    double t0 = ThreadCpuSeconds();
    tokens += ref_first ? TrainRefStep(*trainer) : PlainStep(plain);
    double t1 = ThreadCpuSeconds();
    tokens += ref_first ? PlainStep(plain) : TrainRefStep(*trainer);
    double t2 = ThreadCpuSeconds();
    const double ref = ref_first ? t1 - t0 : t2 - t1;
    const double base = ref_first ? t2 - t1 : t1 - t0;
    ref_s.push_back(ref);
    plain_s.push_back(base);
    ratio.push_back(ref / base);
  }
  state.SetItemsProcessed(tokens);
  state.counters["pairs"] = static_cast<double>(ratio.size());
  state.counters["ref_ms_med"] = 1e3 * Quantile(ref_s, 0.5);
  state.counters["plain_ms_med"] = 1e3 * Quantile(plain_s, 0.5);
  state.counters["overhead_pct_p10"] = 100 * (Quantile(ratio, 0.1) - 1);
  state.counters["overhead_pct_med"] = 100 * (Quantile(ratio, 0.5) - 1);
  // Distribution-free ~95% confidence interval of the median: the order
  // statistics n/2 -+ 0.98 sqrt(n) (binomial, normal approximation).
  std::vector<double> sorted = ratio;
  std::sort(sorted.begin(), sorted.end());
  const double n = static_cast<double>(sorted.size());
  const int lo = std::max(0, static_cast<int>(n / 2 - 0.98 * std::sqrt(n)));
  const int hi = std::min(static_cast<int>(n) - 1, static_cast<int>(n / 2 + 0.98 * std::sqrt(n)));
  state.counters["overhead_pct_med_ci_lo"] = 100 * (sorted[lo] - 1);
  state.counters["overhead_pct_med_ci_hi"] = 100 * (sorted[hi] - 1);
  state.counters["overhead_pct_p90"] = 100 * (Quantile(ratio, 0.9) - 1);
}

BENCHMARK(BM_TrainRefIteration)->Unit(benchmark::kMillisecond)->MinTime(8.0);
BENCHMARK(BM_PlainLibtorchIteration)->Unit(benchmark::kMillisecond)->MinTime(8.0);
// 40 pairs: about 70 s on an idle core; --benchmark_repetitions=N repeats
// the whole paired run. The 2-pair variant is for callgrind.
BENCHMARK(BM_PairedOverhead)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(40)
    ->MeasureProcessCPUTime();
BENCHMARK(BM_PairedOverhead)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2)
    ->MeasureProcessCPUTime();

}  // namespace
}  // namespace skipswarm::model
