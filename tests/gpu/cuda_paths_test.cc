// The CUDA paths, checked on a machine with a GPU (tests/gpu/gpu-check.sh
// runs this binary from the CUDA build). Without CUDA every case skips, so
// the target also builds and passes in the CPU build.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include "model/device_memory.h"
#include "model/hf_export.h"
#include "model/local_pipeline.h"
#include "model/tensor_codec.h"

namespace skipswarm::model {
namespace {

ModelConfig Small() {
  ModelConfig c;
  c.num_layers = 4;
  c.d_model = 64;
  c.num_heads = 4;
  c.ffn_dim = 176;
  c.seq_len = 32;
  c.num_stages = 4;
  return c;
}

at::Tensor Tokens(uint64_t seed, int64_t vocab) {
  return at::randint(vocab, {2, 32}, at::detail::createCPUGenerator(seed), at::kLong);
}

#define SKIP_WITHOUT_CUDA() \
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device"

TEST(CudaPathsTest, StagedOnGpuEqualsCpuAndBf16StaysClose) {
  SKIP_WITHOUT_CUDA();
  RuntimeOptions gpu;
  gpu.device = "cuda";
  RuntimeOptions gpu_bf16 = gpu;
  gpu_bf16.bf16_autocast = true;
  auto cpu = LocalPipeline::Create(Small()).value();
  auto cuda = LocalPipeline::Create(Small(), gpu).value();
  auto bf16 = LocalPipeline::Create(Small(), gpu_bf16).value();
  at::Tensor tokens = Tokens(1, 256), targets = Tokens(2, 256);
  for (const std::vector<int>& route :
       {std::vector<int>{0, 1, 2, 3}, std::vector<int>{0, 2, 3}}) {
    absl::StatusOr<double> a = cpu->TrainMicroBatch(1, route, tokens, targets);
    absl::StatusOr<double> b = cuda->TrainMicroBatch(1, route, tokens, targets);
    absl::StatusOr<double> c = bf16->TrainMicroBatch(1, route, tokens, targets);
    ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << b.status() << c.status();
    EXPECT_NEAR(*a, *b, 1e-4 * *a);
    EXPECT_NEAR(*a, *c, 2e-2 * *a);
  }
}

TEST(CudaPathsTest, CodecRoundTripsFromDeviceMemory) {
  SKIP_WITHOUT_CUDA();
  at::Tensor x = at::randn({4, 32, 64}, at::detail::createCPUGenerator(3)).to(at::kCUDA);
  for (Codec codec : {Codec::kRawFp32, Codec::kBf16, Codec::kFp16, Codec::kInt8Blockwise}) {
    EncodeOptions o;
    o.codec = codec;
    absl::StatusOr<EncodedTensor> e = EncodeTensor(x, o);
    ASSERT_TRUE(e.ok()) << e.status();
    absl::StatusOr<at::Tensor> d = DecodeTensor(e->meta, e->payload, DecodeExpectations{});
    ASSERT_TRUE(d.ok()) << d.status();
    CodecError err = MeasureCodecError(x.cpu(), *d);
    EXPECT_LT(err.rel_l2, codec == Codec::kRawFp32 ? 1e-9 : 1e-2) << static_cast<int>(codec);
    // Decoded tensors move straight back to the device.
    EXPECT_TRUE(d->to(at::kCUDA).is_cuda());
  }
}

TEST(CudaPathsTest, FullModelLogitsAgreeAcrossDevices) {
  SKIP_WITHOUT_CUDA();
  std::vector<std::shared_ptr<StageModule>> cpu, cuda;
  for (int s = 0; s < Small().num_stages; ++s) {
    cpu.push_back(std::make_shared<StageModule>(Small(), s));
    cuda.push_back(std::make_shared<StageModule>(Small(), s));
    cuda.back()->MoveTo(at::Device(at::kCUDA));
  }
  at::Tensor tokens = Tokens(4, 256);
  at::Tensor a = FullModelLogits(cpu, tokens);
  at::Tensor b = FullModelLogits(cuda, tokens.to(at::kCUDA)).cpu();
  EXPECT_LT((a - b).abs().max().item<double>(), 1e-4 * a.abs().max().item<double>());
}

TEST(CudaPathsTest, FreeMemoryIsReported) {
  SKIP_WITHOUT_CUDA();
  EXPECT_GT(FreeDeviceMemoryBytes("cuda:0"), int64_t{1} << 30);
  EXPECT_GT(FreeDeviceMemoryBytes("cpu"), 0);
}

}  // namespace
}  // namespace skipswarm::model
