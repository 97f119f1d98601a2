#include "model/reference_trainer.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "model/checkpoint.h"
#include "model/checkpoint_generation.h"
#include "model/route.h"
#include "model/test_util.h"

namespace skipswarm::model {
namespace {

Corpus TinyCorpus() {
  Corpus c;
  for (int i = 0; i < 5000; ++i) c.train.push_back((i * 7 + i / 13) % 32);
  for (int i = 0; i < 500; ++i) c.validation.push_back((i * 7 + i / 13) % 32);
  return c;
}

TrainerOptions Options(double skip = 0) {
  TrainerOptions o;
  o.model = testing::TinyConfig();
  o.model.num_stages = 6;
  o.optimizer.peak_lr = 1e-2;
  o.optimizer.warmup_steps = 2;
  o.optimizer.total_steps = 40;
  o.mbs_per_iteration = 3;
  o.samples_per_mb = 2;
  o.skip_ratio = skip;
  return o;
}

std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  return std::string(base ? base : "/tmp") + "/" + name;
}

TEST(ReferenceTrainerTest, LossFallsAndEvaluationImproves) {
  Corpus corpus = TinyCorpus();
  auto trainer = ReferenceTrainer::Create(Options(), corpus).value();
  std::vector<MicroBatch> val = ValidationBatches(corpus.validation, 2, 8, 8);
  double before = trainer->Evaluate(FullRoute(6), val).value().loss;
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(trainer->RunIteration().ok());
  double after = trainer->Evaluate(FullRoute(6), val).value().loss;
  EXPECT_LT(after, before * 0.8);
  absl::StatusOr<DropResult> dropped = EvaluateDropped(trainer->pipeline(), 2, val, 3);
  ASSERT_TRUE(dropped.ok()) << dropped.status();
  EXPECT_EQ(dropped->subsets, 3);
}

TEST(ReferenceTrainerTest, SkipRoutesVisitFourOfSixStages) {
  Corpus corpus = TinyCorpus();
  auto trainer = ReferenceTrainer::Create(Options(0.33), corpus).value();
  absl::StatusOr<IterationStats> s = trainer->RunIteration();
  ASSERT_TRUE(s.ok()) << s.status();
  int64_t nonzero = 0;
  for (int st = 1; st < 6; ++st) nonzero += s->visits[st];
  EXPECT_EQ(s->visits[0], 3);
  EXPECT_EQ(nonzero, 3 * 3);  // each MB visits 3 non-zero stages
}

TEST(ReferenceTrainerTest, BalancedRoutesStepEveryStageEveryIteration) {
  // 2 MBs x 3 of 5 non-zero stages: independent routes leave some stage
  // unvisited (no step) in ~16% of iterations; balanced routes never do.
  Corpus corpus = TinyCorpus();
  TrainerOptions o = Options(0.33);
  o.mbs_per_iteration = 2;
  auto balanced = ReferenceTrainer::Create(o, corpus).value();  // the default
  o.balanced_routes = false;
  auto independent = ReferenceTrainer::Create(o, corpus).value();
  int unvisited_independent = 0;
  for (int i = 0; i < 25; ++i) {
    IterationStats b = balanced->RunIteration().value();
    IterationStats d = independent->RunIteration().value();
    for (int st = 1; st < 6; ++st) {
      EXPECT_GE(b.visits[st], 1) << "iteration " << i << " stage " << st;
      if (d.visits[st] == 0) ++unvisited_independent;
    }
  }
  EXPECT_GT(unvisited_independent, 0);
}

TEST(ReferenceTrainerTest, ResumeContinuesExactlyAsUninterrupted) {
  Corpus corpus = TinyCorpus();
  const std::string dir = TempDir("resume_ckpt");
  auto straight = ReferenceTrainer::Create(Options(0.33), corpus).value();
  auto first = ReferenceTrainer::Create(Options(0.33), corpus).value();
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(straight->RunIteration().ok());
    ASSERT_TRUE(first->RunIteration().ok());
  }
  ASSERT_TRUE(first->SaveCheckpoint(dir).ok());
  auto resumed = ReferenceTrainer::Create(Options(0.33), corpus).value();
  ASSERT_TRUE(resumed->LoadCheckpoint(dir).ok());
  EXPECT_EQ(resumed->iteration(), 4);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(straight->RunIteration().ok());
    ASSERT_TRUE(resumed->RunIteration().ok());
  }
  for (int s = 0; s < 6; ++s) {
    EXPECT_EQ(ParameterDigest(straight->pipeline().stage(s).module()),
              ParameterDigest(resumed->pipeline().stage(s).module()))
        << "stage " << s;
  }
  TrainerOptions other = Options();
  other.model.d_model = 32;
  auto foreign = ReferenceTrainer::Create(other, corpus).value();
  EXPECT_EQ(foreign->LoadCheckpoint(dir).code(), absl::StatusCode::kFailedPrecondition);
}

// A crash between a generation's stage files and its manifest (or after a
// stage file was cut short) leaves a torn generation: resume skips it and
// takes the newest complete one, even though the per-stage files of the
// last save disagree on the step.
TEST(ReferenceTrainerTest, ResumeSkipsATornGenerationForTheNewestCompleteOne) {
  Corpus corpus = TinyCorpus();
  const std::string dir = TempDir("resume_torn");
  auto first = ReferenceTrainer::Create(Options(), corpus).value();
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(first->RunIteration().ok());
    ASSERT_TRUE(first->SaveCheckpoint(dir, /*keep=*/2).ok());
  }
  // Only the newest two generations stay.
  EXPECT_EQ(ListGenerationFolders(GenerationsRoot(dir)), (std::vector<int64_t>{4, 3}));
  const std::string digest = ParameterDigest(first->pipeline().stage(2).module());
  ASSERT_TRUE(first->RunIteration().ok());
  ASSERT_TRUE(first->SaveCheckpoint(dir, 2).ok());
  // Generation 5 torn: its manifest never landed.
  std::filesystem::remove(GenerationDir(GenerationsRoot(dir), 5) + "/MANIFEST.json");
  // The flat files as a crash mid-save leaves them: stage 0 newer.
  ASSERT_TRUE(std::filesystem::copy_file(GenerationDir(GenerationsRoot(dir), 4) + "/stage-1.ckpt",
                                         StageCheckpointPath(dir, 1),
                                         std::filesystem::copy_options::overwrite_existing));
  EXPECT_TRUE(ReferenceTrainer::HasCheckpoint(dir));
  auto resumed = ReferenceTrainer::Create(Options(), corpus).value();
  std::vector<std::string> skipped;
  ASSERT_TRUE(resumed->LoadCheckpoint(dir, &skipped).ok());
  EXPECT_EQ(resumed->iteration(), 4);
  EXPECT_EQ(ParameterDigest(resumed->pipeline().stage(2).module()), digest);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_EQ(skipped[0].rfind("generation 5 skipped: no manifest", 0), 0u) << skipped[0];
}

}  // namespace
}  // namespace skipswarm::model
