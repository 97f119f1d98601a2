// The training corpus: text files (the Debian fortunes by default) read,
// tokenized and split deterministically into train and validation token
// streams. No libtorch here: flag parsing and the daemons' configuration
// include this, not dataset.h.
//
//   CorpusOptions opts;                       // empty paths: Debian fortunes
//   SS_ASSIGN_OR_RETURN(Corpus corpus, LoadCorpus(opts, ByteTokenizer()));
//
// Split: the concatenated text (files in sorted path order) is cut into
// 4 KiB chunks; a chunk goes to validation when a hash of its index falls
// under validation_fraction. So the split depends only on the files.
//
// Thread rule: Corpus is a value.
#ifndef SKIPSWARM_MODEL_CORPUS_H_
#define SKIPSWARM_MODEL_CORPUS_H_

#include <cstdint>
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

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_CORPUS_H_
