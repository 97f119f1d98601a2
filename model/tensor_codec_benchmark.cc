// Encode/decode throughput of each wire codec on a 1 MB and a 16 MB float32
// activation (bytes_per_second counts the float32 bytes). One thread.
//
//   bazel run -c opt //model:tensor_codec_benchmark
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#include "model/tensor_codec.h"

namespace skipswarm::model {
namespace {

at::Tensor MakeActivation(int64_t bytes) {
  at::set_num_threads(1);
  at::Generator gen = at::detail::createCPUGenerator(7);
  return at::randn({bytes / 4 / 1024, 1024}, gen);
}

void BM_Encode(benchmark::State& state) {
  const Codec codec = static_cast<Codec>(state.range(0));
  at::Tensor x = MakeActivation(state.range(1));
  for (auto _ : state) {
    auto enc = EncodeTensor(x, {codec, 256});
    benchmark::DoNotOptimize(enc);
  }
  state.SetBytesProcessed(state.iterations() * x.numel() * 4);
  state.SetLabel(CodecName(codec));
}

void BM_Decode(benchmark::State& state) {
  const Codec codec = static_cast<Codec>(state.range(0));
  at::Tensor x = MakeActivation(state.range(1));
  EncodedTensor enc = EncodeTensor(x, {codec, 256}).value();
  DecodeExpectations want;
  for (auto _ : state) {
    auto dec = DecodeTensor(enc.meta, enc.payload, want);
    benchmark::DoNotOptimize(dec);
  }
  auto dec = DecodeTensor(enc.meta, enc.payload, want).value();
  CodecError err = MeasureCodecError(x, dec);
  state.counters["rel_l2_err"] = err.rel_l2;
  state.counters["wire_ratio"] = double(enc.payload.size()) / double(x.numel() * 4);
  state.SetBytesProcessed(state.iterations() * x.numel() * 4);
  state.SetLabel(CodecName(codec));
}

void Args(benchmark::internal::Benchmark* b) {
  for (int codec = 1; codec <= 4; ++codec) {
    for (int64_t bytes : {1 << 20, 16 << 20}) b->Args({codec, bytes});
  }
}

BENCHMARK(BM_Encode)->Apply(Args);
BENCHMARK(BM_Decode)->Apply(Args);

}  // namespace
}  // namespace skipswarm::model
