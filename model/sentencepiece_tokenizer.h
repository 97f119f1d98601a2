// SentencePiece tokenizer (optional; byte-level stays the default) and the
// factory that turns --tokenizer/--sp_model into a Tokenizer.
//
//   TokenizerOptions o{.kind = "sentencepiece", .sp_model = "m.model"};
//   SS_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tok, CreateTokenizer(o));
//   std::vector<int32_t> ids = tok->Encode("hello");   // ids < tok->vocab_size()
//
// Debian's libsentencepiece is reached only through the shared object
// libskipswarm_sentencepiece.so, loaded at run time (Note [SentencePiece
// isolation] in the .cc). It is looked up at `sp_library` when set, else
// next to the running executable, else in the executable's Bazel runfiles,
// else by the dynamic loader's usual search. Not available in
// AddressSanitizer builds (Create returns FailedPrecondition there).
//
// Thread rule: const methods are thread-safe; the static functions may be
// called from any thread.
#ifndef SKIPSWARM_MODEL_SENTENCEPIECE_TOKENIZER_H_
#define SKIPSWARM_MODEL_SENTENCEPIECE_TOKENIZER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/tokenizer.h"

namespace skipswarm::model {

namespace sp_shim {
class Processor;
}

inline constexpr char kSentencePieceLibraryName[] = "libskipswarm_sentencepiece.so";

class SentencePieceTokenizer : public Tokenizer {
 public:
  // Loads the model file at `model_path`. NotFound when it cannot be read,
  // InvalidArgument when it is not a SentencePiece model, FailedPrecondition
  // when the shim library cannot be loaded.
  static absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> Create(
      const std::string& model_path, const std::string& library_path = "");
  // The same from the model's bytes.
  static absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> FromSerialized(
      const std::string& serialized_model, const std::string& library_path = "");

  // Trains a model on `text` (one sentence per line) with sentencepiece
  // trainer flags, e.g. "--vocab_size=100 --model_type=unigram"; returns the
  // serialized model. InvalidArgument when the trainer refuses.
  static absl::StatusOr<std::string> Train(const std::string& text, const std::string& args,
                                           const std::string& library_path = "");

  ~SentencePieceTokenizer() override;

  std::string name() const override { return "sentencepiece"; }
  int vocab_size() const override { return vocab_size_; }
  // Text the model cannot encode (it should not happen with byte fallback or
  // a normal unigram model) yields the ids encoded so far.
  std::vector<int32_t> Encode(absl::string_view text) const override;
  std::string Decode(const std::vector<int32_t>& ids) const override;

 private:
  explicit SentencePieceTokenizer(std::unique_ptr<sp_shim::Processor> processor);

  std::unique_ptr<sp_shim::Processor> processor_;  // lives in the shim library
  int vocab_size_;
};

struct TokenizerOptions {
  std::string kind = "bytes";  // "bytes" or "sentencepiece"
  std::string sp_model;        // SentencePiece model file (kind "sentencepiece")
  std::string sp_library;      // optional path of libskipswarm_sentencepiece.so
};

// InvalidArgument for an unknown kind or a missing --sp_model; otherwise
// what SentencePieceTokenizer::Create returns.
absl::StatusOr<std::unique_ptr<Tokenizer>> CreateTokenizer(const TokenizerOptions& options);

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_SENTENCEPIECE_TOKENIZER_H_
