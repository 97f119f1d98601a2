#include "node/train/sampler_data_source.h"

#include <exception>

#include "absl/strings/str_cat.h"
#include "model/torch_guard.h"

namespace skipswarm::node {

absl::StatusOr<std::unique_ptr<SamplerDataSource>> SamplerDataSource::Create(
    const std::vector<int32_t>& tokens, const model::SamplerOptions& options) {
  model::SamplerOptions o = options;
  o.shard_index = 0;
  o.num_shards = 1;
  absl::StatusOr<std::unique_ptr<model::MicroBatchSampler>> sampler =
      model::MicroBatchSampler::Create(tokens, o);
  if (!sampler.ok()) return sampler.status();
  return std::unique_ptr<SamplerDataSource>(new SamplerDataSource(*std::move(sampler)));
}

absl::StatusOr<MicroBatchData> SamplerDataSource::Get(uint64_t index) const {
  return model::TorchGuard(absl::StrCat("sampling micro-batch ", index), [&]() -> absl::StatusOr<MicroBatchData> {
    model::MicroBatch mb = sampler_->Get(index);
    at::Tensor tokens = mb.tokens.to(at::kLong).contiguous();
    at::Tensor targets = mb.targets.to(at::kLong).contiguous();
    MicroBatchData d;
    d.samples = tokens.size(0);
    d.seq = tokens.size(1);
    d.tokens.assign(tokens.data_ptr<int64_t>(), tokens.data_ptr<int64_t>() + tokens.numel());
    d.targets.assign(targets.data_ptr<int64_t>(), targets.data_ptr<int64_t>() + targets.numel());
    return d;
  });
}

}  // namespace skipswarm::node
