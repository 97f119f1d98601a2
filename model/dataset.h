// Training data as tensors: a seedable micro-batch sampler over a corpus's
// token stream (model/corpus.h) that gives each data node a disjoint shard.
//
//   SS_ASSIGN_OR_RETURN(Corpus corpus, LoadCorpus(opts, ByteTokenizer()));
//   SamplerOptions s{.samples_per_mb = 4, .seq_len = 128, .seed = 1,
//                    .shard_index = 2, .num_shards = 3};
//   SS_ASSIGN_OR_RETURN(auto sampler, MicroBatchSampler::Create(corpus.train, s));
//   MicroBatch mb = sampler->Get(iteration * mbs_per_iteration + j);
//
// Thread rule: MicroBatchSampler's const methods are thread-safe.
#ifndef SKIPSWARM_MODEL_DATASET_H_
#define SKIPSWARM_MODEL_DATASET_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/corpus.h"

namespace skipswarm::model {

struct MicroBatch {
  at::Tensor tokens;   // [samples, seq_len] int64
  at::Tensor targets;  // tokens shifted by one
};

struct SamplerOptions {
  int samples_per_mb = 4;
  int seq_len = 128;
  uint64_t seed = 1;
  int shard_index = 0;  // this data node's shard
  int num_shards = 1;   // number of data nodes
};

class MicroBatchSampler {
 public:
  // Borrows `tokens`, which must outlive the sampler. InvalidArgument when
  // the shard is shorter than one sample.
  static absl::StatusOr<std::unique_ptr<MicroBatchSampler>> Create(
      const std::vector<int32_t>& tokens, const SamplerOptions& options);

  // Micro-batch number `index`: random windows inside this shard, a pure
  // function of (seed, shard, index) so a resumed run sees the same data.
  MicroBatch Get(uint64_t index) const;

  // This shard's token range [begin, end) of the stream.
  size_t begin() const { return begin_; }
  size_t end() const { return end_; }

 private:
  MicroBatchSampler(const std::vector<int32_t>& tokens, const SamplerOptions& o, size_t b,
                    size_t e)
      : tokens_(tokens), options_(o), begin_(b), end_(e) {}
  const std::vector<int32_t>& tokens_;
  SamplerOptions options_;
  size_t begin_, end_;
};

// A fixed evaluation set from `tokens` (the validation stream), cut into
// non-overlapping windows of samples_per_mb x seq_len tokens (+1 for the
// targets). max_batches <= 0, or at least the number of windows: every
// window, in order (the whole split). Otherwise max_batches windows spread
// evenly over the stream, first window included (Note [Validation sample]).
std::vector<MicroBatch> ValidationBatches(const std::vector<int32_t>& tokens, int samples_per_mb,
                                          int seq_len, int max_batches);

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_DATASET_H_
