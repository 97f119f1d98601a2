// DataSource: the micro-batches a data node injects. SamplerDataSource
// (sampler_data_source.h) reads the model's corpus; tests and the
// simulator use SyntheticDataSource.
//
// Note [Data order]: MB j of iteration i at data node d (rank among D data
// nodes, M MBs each) is global micro-batch number i*D*M + d*M + j of one
// shared sampler. With D = 1 this is exactly the reference trainer's order
// (i*M + j), and with D > 1 the union of the data nodes' MBs is the
// reference trainer's iteration at global batch D*M; the data nodes never
// read the same micro-batch.
//
// Thread rule: implementations are thread-safe (const reads).
#ifndef SKIPSWARM_NODE_TRAIN_DATA_SOURCE_H_
#define SKIPSWARM_NODE_TRAIN_DATA_SOURCE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "node/compute/stage_compute.h"

namespace skipswarm::node {

class DataSource {
 public:
  virtual ~DataSource() = default;
  // Global micro-batch number `index` (Note [Data order]).
  virtual absl::StatusOr<MicroBatchData> Get(uint64_t index) const = 0;
};

inline uint64_t GlobalMicroBatchIndex(uint64_t iteration, int data_rank, int num_data_nodes,
                                      int mbs, int j) {
  return iteration * static_cast<uint64_t>(num_data_nodes) * mbs +
         static_cast<uint64_t>(data_rank) * mbs + j;
}

// Deterministic token ids, no corpus (for timed compute).
class SyntheticDataSource final : public DataSource {
 public:
  SyntheticDataSource(int64_t samples, int64_t seq, int64_t vocab)
      : samples_(samples), seq_(seq), vocab_(vocab) {}
  absl::StatusOr<MicroBatchData> Get(uint64_t index) const override {
    MicroBatchData d;
    d.samples = samples_;
    d.seq = seq_;
    for (int64_t i = 0; i < samples_ * seq_; ++i) {
      d.tokens.push_back(static_cast<int64_t>((index * 131 + i * 7) % vocab_));
      d.targets.push_back(static_cast<int64_t>((index * 131 + i * 7 + 1) % vocab_));
    }
    return d;
  }

 private:
  int64_t samples_, seq_, vocab_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_DATA_SOURCE_H_
