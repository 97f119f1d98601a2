// SentencePiece through the dlopen'ed shim, inside a process that also
// loads libtorch (and so the system libprotobuf): Note [SentencePiece
// isolation]. The model is trained here on a small generated text; nothing
// is checked in or downloaded.
#include "model/sentencepiece_tokenizer.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "model/dataset.h"

namespace skipswarm::model {
namespace {

#if defined(__SANITIZE_ADDRESS__)
#define SKIP_UNDER_ASAN() GTEST_SKIP() << "no SentencePiece in ASan builds"
#else
#define SKIP_UNDER_ASAN() (void)0
#endif

std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(base ? base : "/tmp") + "/" + name;
  std::filesystem::create_directories(dir);
  return dir;
}

void Write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string SmallText() {
  static const char* kWords[] = {"the", "quick", "brown", "fox", "jumps", "over",
                                 "lazy", "dog", "and", "runs", "far", "away"};
  std::string text;
  for (int i = 0; i < 400; ++i) {
    for (int w = 0; w < 7; ++w) {
      if (w) text += ' ';
      text += kWords[(i * 5 + w * 3 + i / 7) % 12];
    }
    text += ".\n";
  }
  return text;
}

// A 40-piece unigram model trained on SmallText().
std::string TrainSmallModel() {
  absl::StatusOr<std::string> model = SentencePieceTokenizer::Train(
      SmallText(), "--vocab_size=40 --model_type=unigram --minloglevel=2");
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *model : "";
}

TEST(SentencePieceTokenizerTest, TrainsEncodesAndRoundTrips) {
  SKIP_UNDER_ASAN();
  const std::string model = TrainSmallModel();
  ASSERT_FALSE(model.empty());
  auto tok = SentencePieceTokenizer::FromSerialized(model);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->vocab_size(), 40);
  EXPECT_EQ((*tok)->name(), "sentencepiece");
  const std::string text = "the lazy dog runs far away.";
  std::vector<int32_t> ids = (*tok)->Encode(text);
  ASSERT_FALSE(ids.empty());
  EXPECT_LT(ids.size(), text.size());  // pieces are longer than bytes
  for (int32_t id : ids) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, 40);
  }
  EXPECT_EQ((*tok)->Decode(ids), text);
  ids.push_back(1000);  // out of vocabulary: skipped
  ids.push_back(-1);
  EXPECT_EQ((*tok)->Decode(ids), text);
  // Deterministic: the same text trains the same model.
  EXPECT_EQ(TrainSmallModel(), model);
}

TEST(SentencePieceTokenizerTest, FeedsTheCorpusLoaderFromAModelFile) {
  SKIP_UNDER_ASAN();
  const std::string dir = TempDir("sp_corpus");
  Write(dir + "/m.model", TrainSmallModel());
  Write(dir + "/text.txt", SmallText());
  TokenizerOptions options;
  options.kind = "sentencepiece";
  options.sp_model = dir + "/m.model";
  auto tok = CreateTokenizer(options);
  ASSERT_TRUE(tok.ok()) << tok.status();
  CorpusOptions corpus_options;
  corpus_options.paths = {dir + "/text.txt"};
  corpus_options.validation_fraction = 0.2;
  auto corpus = LoadCorpus(corpus_options, **tok);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  ASSERT_FALSE(corpus->validation.empty());
  EXPECT_EQ(corpus->train_bytes + corpus->validation_bytes, SmallText().size());
  EXPECT_LT(corpus->train.size(), corpus->train_bytes / 2);
  for (int32_t id : corpus->train) ASSERT_LT(id, 40);
}

TEST(SentencePieceTokenizerTest, RejectsBadModelFilesClearly) {
  SKIP_UNDER_ASAN();
  const std::string dir = TempDir("sp_bad");
  auto missing = SentencePieceTokenizer::Create(dir + "/missing.model");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();

  Write(dir + "/empty.model", "");
  auto empty = SentencePieceTokenizer::Create(dir + "/empty.model");
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument) << empty.status();
  EXPECT_NE(empty.status().message().find("empty"), std::string::npos) << empty.status();

  Write(dir + "/text.model", SmallText());
  auto text = SentencePieceTokenizer::Create(dir + "/text.model");
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument) << text.status();
  EXPECT_NE(text.status().message().find("not a SentencePiece model"), std::string::npos)
      << text.status();
  EXPECT_NE(text.status().message().find("text.model"), std::string::npos) << text.status();

  const std::string model = TrainSmallModel();
  Write(dir + "/truncated.model", model.substr(0, model.size() / 2));
  auto truncated = SentencePieceTokenizer::Create(dir + "/truncated.model");
  EXPECT_EQ(truncated.status().code(), absl::StatusCode::kInvalidArgument)
      << truncated.status();
}

TEST(SentencePieceTokenizerTest, MissingShimLibraryIsAFailedPrecondition) {
  SKIP_UNDER_ASAN();
  auto tok = SentencePieceTokenizer::FromSerialized("x", "/nonexistent/libsp.so");
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kFailedPrecondition) << tok.status();
  auto bad_args = SentencePieceTokenizer::Train(SmallText(), "--vocab_size=-3");
  EXPECT_EQ(bad_args.status().code(), absl::StatusCode::kInvalidArgument) << bad_args.status();
}

TEST(CreateTokenizerTest, BytesByDefaultAndClearErrors) {
  auto bytes = CreateTokenizer(TokenizerOptions());
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ((*bytes)->name(), "bytes");
  EXPECT_EQ((*bytes)->vocab_size(), 256);

  TokenizerOptions unknown;
  unknown.kind = "wordpiece";
  EXPECT_EQ(CreateTokenizer(unknown).status().code(), absl::StatusCode::kInvalidArgument);
  TokenizerOptions no_model;
  no_model.kind = "sentencepiece";
  EXPECT_EQ(CreateTokenizer(no_model).status().code(), absl::StatusCode::kInvalidArgument);
  TokenizerOptions stray_model;
  stray_model.sp_model = "m.model";
  EXPECT_EQ(CreateTokenizer(stray_model).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace skipswarm::model
