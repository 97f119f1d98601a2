// The binary interface between SentencePieceTokenizer and the shared object
// libskipswarm_sentencepiece.so, which is the only code that links Debian's
// libsentencepiece. Standard-library types only: this header is compiled
// both with Abseil (the tokenizer) and with sentencepiece's headers (the
// shim), whose `absl::string_view` alias clashes with Abseil's.
//
// Why a separately loaded shim: Note [SentencePiece isolation] in
// sentencepiece_tokenizer.cc.
//
// Thread rule: a Processor's const methods are thread-safe once Load
// returned true.
#ifndef SKIPSWARM_MODEL_SENTENCEPIECE_SHIM_H_
#define SKIPSWARM_MODEL_SENTENCEPIECE_SHIM_H_

#include <string>
#include <string_view>
#include <vector>

namespace skipswarm::model::sp_shim {

// Bump when anything below changes shape.
inline constexpr int kAbiVersion = 1;

class Processor {
 public:
  virtual ~Processor() = default;
  // Parses a serialized model. False (with a message) when it is not one.
  virtual bool Load(const std::string& serialized_model, std::string* error) = 0;
  virtual int PieceCount() const = 0;
  virtual bool Encode(std::string_view text, std::vector<int>* ids, std::string* error) const = 0;
  // `ids` must be in [0, PieceCount()).
  virtual bool Decode(const std::vector<int>& ids, std::string* text,
                      std::string* error) const = 0;
};

struct Api {
  int abi_version;
  // Caller owns the result (delete through the virtual destructor).
  Processor* (*new_processor)();
  // Trains a model on `text` (one sentence per line) with sentencepiece
  // trainer flags `args` (e.g. "--vocab_size=100 --model_type=unigram");
  // the serialized model goes to *model.
  bool (*train)(const std::string& text, const std::string& args, std::string* model,
                std::string* error);
};

}  // namespace skipswarm::model::sp_shim

// The shared object's one exported entry point.
extern "C" const skipswarm::model::sp_shim::Api* SkipSwarmSentencePieceApi();
inline constexpr char kSkipSwarmSentencePieceApiSymbol[] = "SkipSwarmSentencePieceApi";

#endif  // SKIPSWARM_MODEL_SENTENCEPIECE_SHIM_H_
