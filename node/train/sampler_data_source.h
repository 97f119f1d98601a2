// SamplerDataSource: micro-batches from the model's corpus sampler
// (model/dataset.h), in the global order of Note [Data order].
//
//   SamplerOptions s{.samples_per_mb = 4, .seq_len = 128, .seed = 1};
//   SS_ASSIGN_OR_RETURN(auto data, SamplerDataSource::Create(corpus.train, s));
//
// Thread rule: thread-safe. Borrows the token stream, which must outlive it.
#ifndef SKIPSWARM_NODE_TRAIN_SAMPLER_DATA_SOURCE_H_
#define SKIPSWARM_NODE_TRAIN_SAMPLER_DATA_SOURCE_H_

#include <memory>
#include <vector>

#include "model/dataset.h"
#include "node/train/data_source.h"

namespace skipswarm::node {

class SamplerDataSource final : public DataSource {
 public:
  // One unsharded sampler shared by every data node (same seed everywhere).
  static absl::StatusOr<std::unique_ptr<SamplerDataSource>> Create(
      const std::vector<int32_t>& tokens, const model::SamplerOptions& options);

  absl::StatusOr<MicroBatchData> Get(uint64_t index) const override;

 private:
  explicit SamplerDataSource(std::unique_ptr<model::MicroBatchSampler> sampler)
      : sampler_(std::move(sampler)) {}
  std::unique_ptr<model::MicroBatchSampler> sampler_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_SAMPLER_DATA_SOURCE_H_
