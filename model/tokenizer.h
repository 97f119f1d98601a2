// Tokenizers turn text into model token ids and back.
//
//   ByteTokenizer tok;                        // vocab 256, nothing to train
//   std::vector<int32_t> ids = tok.Encode("hello");
//
// The byte tokenizer is the default: no download, no training step, and its
// loss converts directly to bits per byte (loss / ln 2).
//
// Thread rule: const methods are thread-safe.
#ifndef SKIPSWARM_MODEL_TOKENIZER_H_
#define SKIPSWARM_MODEL_TOKENIZER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace skipswarm::model {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::string name() const = 0;
  virtual int vocab_size() const = 0;
  virtual std::vector<int32_t> Encode(absl::string_view text) const = 0;
  // Ids outside the vocabulary are skipped.
  virtual std::string Decode(const std::vector<int32_t>& ids) const = 0;
};

// One token per byte (UTF-8 text becomes its bytes).
class ByteTokenizer : public Tokenizer {
 public:
  std::string name() const override { return "bytes"; }
  int vocab_size() const override { return 256; }
  std::vector<int32_t> Encode(absl::string_view text) const override;
  std::string Decode(const std::vector<int32_t>& ids) const override;
};

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_TOKENIZER_H_
