#include <gtest/gtest.h>

#include "model/reference_trainer.h"
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

TrainerOptions Options() {
  TrainerOptions o;
  o.model = testing::TinyConfig();
  o.model.num_stages = 4;
  o.optimizer.peak_lr = 1e-2;
  o.optimizer.warmup_steps = 2;
  o.optimizer.total_steps = 10;
  o.mbs_per_iteration = 3;
  o.samples_per_mb = 2;
  return o;
}

TEST(ReferenceTrainerReplayTest, ReplayingTheOwnDataOrderOnFullRoutesIsTheSameRun) {
  Corpus corpus = TinyCorpus();
  auto plain = ReferenceTrainer::Create(Options(), corpus).value();
  auto replay = ReferenceTrainer::Create(Options(), corpus).value();
  for (int64_t i = 0; i < 6; ++i) {
    std::vector<RoutedMicroBatch> mbs;
    for (int j = 0; j < 3; ++j) mbs.push_back({static_cast<uint64_t>(i * 3 + j), FullRoute(4)});
    absl::StatusOr<IterationStats> want = plain->RunIteration();
    absl::StatusOr<IterationStats> got = replay->RunIteration(mbs);
    ASSERT_TRUE(want.ok() && got.ok()) << want.status() << got.status();
    EXPECT_EQ(got->loss, want->loss) << "iteration " << i;
    EXPECT_EQ(got->visits, want->visits);
    EXPECT_EQ(got->tokens, want->tokens);
    EXPECT_EQ(got->iteration, i);
  }
  EXPECT_EQ(replay->iteration(), 6);
}

TEST(ReferenceTrainerReplayTest, SkipRoutesAndOtherMicroBatchesChangeTheRun) {
  Corpus corpus = TinyCorpus();
  auto a = ReferenceTrainer::Create(Options(), corpus).value();
  auto b = ReferenceTrainer::Create(Options(), corpus).value();
  absl::StatusOr<IterationStats> sa = a->RunIteration({{0, {0, 1, 3}}, {1, {0, 2}}});
  ASSERT_TRUE(sa.ok()) << sa.status();
  EXPECT_EQ(sa->visits, (std::vector<int64_t>{2, 1, 1, 1}));
  absl::StatusOr<IterationStats> sb = b->RunIteration({{7, {0, 1, 3}}, {1, {0, 2}}});
  ASSERT_TRUE(sb.ok()) << sb.status();
  EXPECT_NE(sa->loss, sb->loss);  // micro-batch 7 is other data
}

TEST(ReferenceTrainerReplayTest, EmptyOrInvalidReplayIsRefused) {
  Corpus corpus = TinyCorpus();
  auto t = ReferenceTrainer::Create(Options(), corpus).value();
  EXPECT_TRUE(absl::IsInvalidArgument(t->RunIteration(std::vector<RoutedMicroBatch>{}).status()));
  EXPECT_FALSE(t->RunIteration({{0, {1, 2}}}).ok());  // must start on stage 0
  EXPECT_EQ(t->iteration(), 0);
}

}  // namespace
}  // namespace skipswarm::model
