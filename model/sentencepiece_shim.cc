// libskipswarm_sentencepiece.so: sentencepiece behind the plain-C++ Api of
// sentencepiece_shim.h. Loaded by SentencePieceTokenizer with dlopen
// (Note [SentencePiece isolation] in sentencepiece_tokenizer.cc); never link
// this file into a binary. Includes no Abseil header on purpose.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <exception>
#include <memory>
#include <sstream>

#include "model/sentencepiece_shim.h"

namespace skipswarm::model::sp_shim {
namespace {

class ShimProcessor : public Processor {
 public:
  bool Load(const std::string& serialized_model, std::string* error) override {
    try {
      auto p = std::make_unique<sentencepiece::SentencePieceProcessor>();
      const sentencepiece::util::Status s = p->LoadFromSerializedProto(serialized_model);
      if (!s.ok()) {
        *error = s.ToString();
        return false;
      }
      if (p->GetPieceSize() <= 0) {
        *error = "the model has no pieces";
        return false;
      }
      processor_ = std::move(p);
      return true;
    } catch (const std::exception& e) {
      *error = e.what();
      return false;
    }
  }

  int PieceCount() const override { return processor_ ? processor_->GetPieceSize() : 0; }

  bool Encode(std::string_view text, std::vector<int>* ids, std::string* error) const override {
    try {
      const sentencepiece::util::Status s = processor_->Encode(text, ids);
      if (!s.ok()) *error = s.ToString();
      return s.ok();
    } catch (const std::exception& e) {
      *error = e.what();
      return false;
    }
  }

  bool Decode(const std::vector<int>& ids, std::string* text, std::string* error) const override {
    try {
      const sentencepiece::util::Status s = processor_->Decode(ids, text);
      if (!s.ok()) *error = s.ToString();
      return s.ok();
    } catch (const std::exception& e) {
      *error = e.what();
      return false;
    }
  }

 private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
};

// Feeds the trainer the lines of an in-memory text.
class LineIterator : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(const std::string& text) : in_(text) { Next(); }
  bool done() const override { return done_; }
  void Next() override { done_ = !std::getline(in_, line_); }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  std::istringstream in_;
  std::string line_;
  bool done_ = false;
};

Processor* NewProcessor() { return new ShimProcessor(); }

bool Train(const std::string& text, const std::string& args, std::string* model,
           std::string* error) {
  try {
    LineIterator lines(text);
    const sentencepiece::util::Status s =
        sentencepiece::SentencePieceTrainer::Train(args, &lines, model);
    if (!s.ok()) *error = s.ToString();
    return s.ok();
  } catch (const std::exception& e) {
    *error = e.what();
    return false;
  }
}

constexpr Api kApi = {kAbiVersion, &NewProcessor, &Train};

}  // namespace
}  // namespace skipswarm::model::sp_shim

extern "C" __attribute__((visibility("default"))) const skipswarm::model::sp_shim::Api*
SkipSwarmSentencePieceApi() {
  return &skipswarm::model::sp_shim::kApi;
}
