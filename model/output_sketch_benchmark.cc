// Cost of verified compute's sketch (Note [Output sketch]): SketchOutput on
// Y and CheckAgainstSketch at the hop after, for the default model's
// activation (4 samples x 128 tokens x 256 = 131,072 floats) and the 125m
// preset's (4 x 1024 x 768). One thread.
//
//   bazel run -c opt //model:output_sketch_benchmark
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "model/output_sketch.h"

namespace skipswarm::model {
namespace {

std::vector<float> Values(int64_t n) {
  std::vector<float> v(n);
  uint64_t x = 12345;
  for (float& f : v) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    f = static_cast<float>(static_cast<int64_t>(x >> 40) - (int64_t{1} << 23)) / (1 << 23);
  }
  return v;
}

std::vector<int64_t> ShapeFor(int64_t d_model, int64_t seq) { return {4, seq, d_model}; }

void BM_Sketch(benchmark::State& state) {
  const std::vector<int64_t> shape = ShapeFor(state.range(0), state.range(1));
  const std::vector<float> v = Values(shape[0] * shape[1] * shape[2]);
  for (auto _ : state) {
    OutputSketch s = SketchOutput(v, shape, 99);
    benchmark::DoNotOptimize(s.norm);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(v.size()) * 4);
}
BENCHMARK(BM_Sketch)->Args({256, 128})->Args({768, 1024})->Unit(benchmark::kMicrosecond);

void BM_Check(benchmark::State& state) {
  const std::vector<int64_t> shape = ShapeFor(state.range(0), state.range(1));
  const std::vector<float> v = Values(shape[0] * shape[1] * shape[2]);
  const OutputSketch s = SketchOutput(v, shape, 99);
  const EncodeOptions codec{state.range(2) ? Codec::kInt8Blockwise : Codec::kRawFp32};
  for (auto _ : state) {
    absl::StatusOr<SketchVerdict> r = CheckAgainstSketch(v, shape, codec, s);
    benchmark::DoNotOptimize(r->match);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(v.size()) * 4);
}
BENCHMARK(BM_Check)
    ->Args({256, 128, 0})
    ->Args({256, 128, 1})
    ->Args({768, 1024, 1})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace skipswarm::model
