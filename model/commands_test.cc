// End to end: train-ref on a tiny model and corpus, resume, then eval.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "model/eval_command.h"
#include "model/sentencepiece_tokenizer.h"
#include "model/train_ref_command.h"

ABSL_DECLARE_FLAG(int, layers);
ABSL_DECLARE_FLAG(int, d_model);
ABSL_DECLARE_FLAG(int, heads);
ABSL_DECLARE_FLAG(int, ffn);
ABSL_DECLARE_FLAG(int, seq_len);
ABSL_DECLARE_FLAG(int, stages);
ABSL_DECLARE_FLAG(int, threads);
ABSL_DECLARE_FLAG(int, eval_batches);
ABSL_DECLARE_FLAG(int, samples_per_mb);
ABSL_DECLARE_FLAG(std::vector<std::string>, corpus);
ABSL_DECLARE_FLAG(std::string, checkpoint_dir);
ABSL_DECLARE_FLAG(int64_t, iterations);
ABSL_DECLARE_FLAG(int64_t, warmup_steps);
ABSL_DECLARE_FLAG(double, skip_ratio);
ABSL_DECLARE_FLAG(bool, resume);
ABSL_DECLARE_FLAG(std::string, checkpoint);
ABSL_DECLARE_FLAG(std::vector<std::string>, drop_stages);
ABSL_DECLARE_FLAG(int, vocab);
ABSL_DECLARE_FLAG(std::string, tokenizer);
ABSL_DECLARE_FLAG(std::string, sp_model);
ABSL_DECLARE_FLAG(std::string, sdp);
ABSL_DECLARE_FLAG(int, sdp_workers);
ABSL_DECLARE_FLAG(double, sdp_keep);

namespace skipswarm::model {
namespace {

// A fresh folder holding text.txt, and the tiny-model flags that train on it.
std::string SetUpTinyRun(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(base ? base : "/tmp") + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  {
    std::ofstream text(dir + "/text.txt");
    for (int i = 0; i < 400; ++i) text << "The quick brown fox jumps over the lazy dog " << i << ".\n";
  }
  absl::SetFlag(&FLAGS_layers, 4);
  absl::SetFlag(&FLAGS_d_model, 16);
  absl::SetFlag(&FLAGS_heads, 2);
  absl::SetFlag(&FLAGS_ffn, 32);
  absl::SetFlag(&FLAGS_seq_len, 16);
  absl::SetFlag(&FLAGS_stages, 4);
  absl::SetFlag(&FLAGS_threads, 1);
  absl::SetFlag(&FLAGS_eval_batches, 2);
  absl::SetFlag(&FLAGS_samples_per_mb, 2);
  absl::SetFlag(&FLAGS_corpus, std::vector<std::string>{dir + "/text.txt"});
  absl::SetFlag(&FLAGS_checkpoint_dir, dir + "/ckpt");
  absl::SetFlag(&FLAGS_iterations, 3);
  absl::SetFlag(&FLAGS_warmup_steps, 1);
  absl::SetFlag(&FLAGS_skip_ratio, 0.25);
  absl::SetFlag(&FLAGS_resume, false);
  absl::SetFlag(&FLAGS_drop_stages, std::vector<std::string>{});
  return dir;
}

TEST(CommandsTest, TrainRefResumeAndEval) {
  const std::string dir = SetUpTinyRun("commands_test");
  common::cli::Command train = TrainRefCommand();
  EXPECT_EQ(train.name, "train-ref");
  ASSERT_EQ(train.run({}), 0);
  EXPECT_TRUE(std::filesystem::exists(dir + "/ckpt/stage-3.ckpt"));
  absl::SetFlag(&FLAGS_iterations, 5);
  absl::SetFlag(&FLAGS_resume, true);
  ASSERT_EQ(train.run({}), 0);
  EXPECT_EQ(train.run({"extra"}), 2);

  common::cli::Command eval = EvalCommand();
  absl::SetFlag(&FLAGS_checkpoint, dir + "/ckpt");
  EXPECT_EQ(eval.run({}), 0);
  absl::SetFlag(&FLAGS_drop_stages, std::vector<std::string>{"2"});
  EXPECT_EQ(eval.run({}), 0);
  absl::SetFlag(&FLAGS_drop_stages, std::vector<std::string>{"0"});
  EXPECT_EQ(eval.run({}), 1);
  absl::SetFlag(&FLAGS_checkpoint, dir + "/missing");
  EXPECT_EQ(eval.run({}), 1);
}

TEST(CommandsTest, TrainRefSdpBothVariantsThenEval) {
  const std::string dir = SetUpTinyRun("commands_sdp_test");
  common::cli::Command train = TrainRefCommand();
  absl::SetFlag(&FLAGS_sdp_workers, 4);
  absl::SetFlag(&FLAGS_sdp_keep, 0.75);  // 3 of 4 stages: {0, 1, 3} or {0, 2, 3}
  absl::SetFlag(&FLAGS_sdp, "forward");
  EXPECT_EQ(train.run({}), 1);  // --skip_ratio=0.25 is still set
  absl::SetFlag(&FLAGS_skip_ratio, 0.0);
  for (const char* mode : {"forward", "backward"}) {
    absl::SetFlag(&FLAGS_sdp, mode);
    std::filesystem::remove_all(dir + "/ckpt");
    ASSERT_EQ(train.run({}), 0) << mode;
    common::cli::Command eval = EvalCommand();
    absl::SetFlag(&FLAGS_checkpoint, dir + "/ckpt");
    EXPECT_EQ(eval.run({}), 0) << mode;
  }
  absl::SetFlag(&FLAGS_sdp_workers, 3);  // cannot own stages 1 and 2 equally
  EXPECT_EQ(train.run({}), 1);
  absl::SetFlag(&FLAGS_sdp, "sideways");
  absl::SetFlag(&FLAGS_sdp_workers, 4);
  EXPECT_EQ(train.run({}), 1);
  absl::SetFlag(&FLAGS_sdp, "off");
}

TEST(CommandsTest, TrainRefAndEvalWithSentencePiece) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "no SentencePiece in ASan builds";
#endif
  const std::string dir = SetUpTinyRun("commands_sp_test");
  std::ifstream in(dir + "/text.txt");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  absl::StatusOr<std::string> model = SentencePieceTokenizer::Train(
      text, "--vocab_size=48 --hard_vocab_limit=false --model_type=unigram --minloglevel=2");
  ASSERT_TRUE(model.ok()) << model.status();
  std::ofstream(dir + "/m.model", std::ios::binary) << *model;
  absl::SetFlag(&FLAGS_tokenizer, "sentencepiece");
  absl::SetFlag(&FLAGS_sp_model, dir + "/m.model");

  common::cli::Command train = TrainRefCommand();
  absl::SetFlag(&FLAGS_vocab, 32);  // fewer than the model's pieces (at least 42)
  EXPECT_EQ(train.run({}), 1);
  absl::SetFlag(&FLAGS_vocab, 48);
  ASSERT_EQ(train.run({}), 0);

  common::cli::Command eval = EvalCommand();
  absl::SetFlag(&FLAGS_checkpoint, dir + "/ckpt");
  EXPECT_EQ(eval.run({}), 0);
  absl::SetFlag(&FLAGS_sp_model, dir + "/text.txt");  // not a model
  EXPECT_EQ(eval.run({}), 1);
  absl::SetFlag(&FLAGS_tokenizer, "bytes");  // 256 ids do not fit a 48-token model
  absl::SetFlag(&FLAGS_sp_model, "");
  EXPECT_EQ(eval.run({}), 1);
  absl::SetFlag(&FLAGS_vocab, 256);
}

}  // namespace
}  // namespace skipswarm::model
