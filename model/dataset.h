// Training data: a text corpus split deterministically into train and
// validation token streams, and a seedable micro-batch sampler that gives
// each data node a disjoint shard.
//
//   CorpusOptions opts;                       // empty paths: Debian fortunes
//   SS_ASSIGN_OR_RETURN(Corpus corpus, LoadCorpus(opts, ByteTokenizer()));
//   SamplerOptions s{.samples_per_mb = 4, .seq_len = 128, .seed = 1,
//                    .shard_index = 2, .num_shards = 3};
//   SS_ASSIGN_OR_RETURN(auto sampler, MicroBatchSampler::Create(corpus.train, s));
//   MicroBatch mb = sampler->Get(iteration * mbs_per_iteration + j);
//
// Split: the concatenated text (files in sorted path order) is cut into
// 4 KiB chunks; a chunk goes to validation when a hash of its index falls
// under validation_fraction. So the split depends only on the files.
//
// Thread rule: Corpus is a value; MicroBatchSampler's const methods are
// thread-safe.
#ifndef SKIPSWARM_MODEL_DATASET_H_
#define SKIPSWARM_MODEL_DATASET_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/tokenizer.h"

namespace skipswarm::model {

inline constexpr char kDefaultCorpusDir[] = "/usr/share/games/fortunes";

struct CorpusOptions {
  // Text files or directories (searched recursively). Empty: the fortunes.
  std::vector<std::string> paths;
  double validation_fraction = 0.05;
  size_t chunk_bytes = 4096;
};

struct Corpus {
  std::vector<std::string> files;
  std::vector<int32_t> train;
  std::vector<int32_t> validation;
  // Text bytes behind each stream (equal to the token counts for the byte
  // tokenizer); bits per byte = loss / ln 2 / BytesPerToken().
  size_t train_bytes = 0;
  size_t validation_bytes = 0;
  // Mean bytes per validation token (1 for the byte tokenizer, 1 when empty).
  double BytesPerToken() const {
    return validation.empty() ? 1.0
                              : static_cast<double>(validation_bytes) /
                                    static_cast<double>(validation.size());
  }
};

// The files a corpus would read, sorted. In directories, skips hidden
// entries, fortune index files (*.dat), the *.u8 aliases and the offensive
// fortunes folder "off". NotFound when nothing readable is found.
absl::StatusOr<std::vector<std::string>> ListCorpusFiles(const std::vector<std::string>& paths);

absl::StatusOr<Corpus> LoadCorpus(const CorpusOptions& options, const Tokenizer& tokenizer);

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

// Consecutive non-overlapping windows from the start of `tokens` (the
// validation stream), at most max_batches of them: a fixed evaluation set.
std::vector<MicroBatch> SequentialBatches(const std::vector<int32_t>& tokens, int samples_per_mb,
                                          int seq_len, int max_batches);

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_DATASET_H_
