// One AdamW step over a stage of the default model (~1.6 M parameters in
// its tensors, both parameter groups as StageOptimizer makes them):
// libtorch's AdamW::step, parameter by parameter, against ForeachAdamWStep
// (Note [Foreach AdamW] in optimizer.h), each op over a group's list. One
// intra-op thread, as the daemons run; items_per_second = parameters/s.
//
//   bazel build -c opt //model:optimizer_benchmark
//   bazel-bin/model/optimizer_benchmark --benchmark_repetitions=5
//
// On the CPU the list ops run the per-tensor kernels in a loop, so the
// difference there is dispatch only; the multi-tensor kernels that make
// the list step cheaper exist on a GPU.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <torch/optim/adamw.h>

#include <memory>
#include <vector>

#include "model/local_pipeline.h"
#include "model/model_config.h"
#include "model/optimizer.h"

namespace skipswarm::model {
namespace {

void BM_AdamWStep(benchmark::State& state) {
  at::set_num_threads(1);
  const bool foreach_step = state.range(0) == 1;
  ModelConfig config;  // the default model
  auto pipe = LocalPipeline::Create(config).value();
  StageModule& module = pipe->stage(1).module();
  OptimizerOptions options;
  StageOptimizer optimizer(module, options);
  int64_t numel = 0;
  at::manual_seed(3);
  for (at::Tensor& p : module.parameters()) {
    p.mutable_grad() = at::randn_like(p) * 1e-3;
    numel += p.numel();
  }
  torch::optim::AdamW& adamw = optimizer.adamw();
  for (auto _ : state) {
    if (foreach_step) {
      benchmark::DoNotOptimize(ForeachAdamWStep(adamw));
    } else {
      adamw.step();
    }
  }
  state.SetItemsProcessed(state.iterations() * numel);
  state.counters["params"] = static_cast<double>(numel);
  state.counters["tensors"] = static_cast<double>(module.parameters().size());
}
BENCHMARK(BM_AdamWStep)->Arg(0)->Arg(1)->ArgName("foreach")->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace skipswarm::model
