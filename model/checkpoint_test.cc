#include "model/checkpoint.h"

#include "absl/strings/str_cat.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"

#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include "absl/strings/match.h"
#include "common/atomic_file.h"
#include "model/checkpoint_tensors.h"
#include "model/checkpoint_test_util.h"
#include "model/local_pipeline.h"
#include "model/optimizer.h"
#include "model/test_util.h"
#include "model/torch_compat.h"

namespace skipswarm::model {
namespace {

using testing::TinyConfig;
using testing::TinyTokens;
constexpr StateSource kPeer = StateSource::kPeer;

std::string TempPath(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  return std::string(base ? base : "/tmp") + "/" + name;
}

// Trains stage 1 of a pipeline for one step and returns the pipeline.
std::unique_ptr<LocalPipeline> Trained(StageOptimizer** opt_out,
                                       std::unique_ptr<StageOptimizer>& holder) {
  auto pipe = LocalPipeline::Create(TinyConfig()).value();
  holder = std::make_unique<StageOptimizer>(pipe->stage(1).module(), OptimizerOptions());
  EXPECT_TRUE(pipe->TrainMicroBatch(1, {0, 1, 2}, TinyTokens(1), TinyTokens(2)).ok());
  EXPECT_TRUE(holder->Step(0, 1).ok());
  *opt_out = holder.get();
  return pipe;
}

TEST(CheckpointTest, RoundTripRestoresWeightsAndOptimizerState) {
  std::unique_ptr<StageOptimizer> h1, h2;
  StageOptimizer* o1;
  auto p1 = Trained(&o1, h1);
  const std::string path = TempPath("stage1.ckpt");
  ASSERT_TRUE(SaveStageCheckpoint(path, p1->stage(1).module(), &o1->adamw(), 7, "note").ok());
  for (const auto& entry : std::filesystem::directory_iterator(TempPath(""))) {
    EXPECT_EQ(entry.path().filename().string().find("stage1.ckpt.tmp"), std::string::npos)
        << "a temp file was left: " << entry.path();
  }

  auto p2 = LocalPipeline::Create(TinyConfig()).value();
  h2 = std::make_unique<StageOptimizer>(p2->stage(1).module(), OptimizerOptions());
  EXPECT_NE(ParameterDigest(p1->stage(1).module()), ParameterDigest(p2->stage(1).module()));
  absl::StatusOr<CheckpointInfo> info = LoadStageCheckpoint(path, p2->stage(1).module(), &h2->adamw());
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->step, 7);
  EXPECT_EQ(info->stage, 1);
  EXPECT_EQ(info->extra, "note");
  EXPECT_EQ(ParameterDigest(p1->stage(1).module()), ParameterDigest(p2->stage(1).module()));

  // One more identical step on both: identical again only if the AdamW
  // moments were restored too.
  for (auto* p : {p1.get(), p2.get()}) {
    ASSERT_TRUE(p->TrainMicroBatch(2, {0, 1, 2}, TinyTokens(3), TinyTokens(4)).ok());
  }
  ASSERT_TRUE(o1->Step(1, 1).ok());
  ASSERT_TRUE(h2->Step(1, 1).ok());
  EXPECT_EQ(ParameterDigest(p1->stage(1).module()), ParameterDigest(p2->stage(1).module()));
}

TEST(CheckpointTest, RejectsCorruptedTruncatedAndForeignCheckpoints) {
  std::unique_ptr<StageOptimizer> h;
  StageOptimizer* o;
  auto pipe = Trained(&o, h);
  StageModule& m = pipe->stage(1).module();
  std::string bytes = SerializeStageState(m, &o->adamw(), 3).value();
  const std::string before = ParameterDigest(m);
  ASSERT_TRUE(RestoreStageState(bytes, m, &o->adamw(), kPeer).ok());

  std::string flipped = bytes;
  flipped[flipped.size() / 2] ^= 1;
  EXPECT_EQ(RestoreStageState(flipped, m, nullptr, kPeer).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(RestoreStageState(bytes.substr(0, bytes.size() - 10), m, nullptr, kPeer).status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(RestoreStageState("", m, nullptr, kPeer).status().code(), absl::StatusCode::kDataLoss);
  std::string magic = bytes;
  magic[0] = 'X';
  EXPECT_EQ(RestoreStageState(magic, m, nullptr, kPeer).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // Another stage of the same model.
  absl::Status wrong_stage = RestoreStageState(bytes, pipe->stage(2).module(), nullptr, kPeer).status();
  EXPECT_EQ(wrong_stage.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(wrong_stage.message().find("stage 1"), std::string::npos);
  // Another model.
  ModelConfig other = TinyConfig();
  other.ffn_dim = 32;
  StageModule foreign(other, 1);
  absl::Status wrong_model = RestoreStageState(bytes, foreign, nullptr, kPeer).status();
  EXPECT_EQ(wrong_model.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(wrong_model.message().find("model config"), std::string::npos) << wrong_model;
  // Only --seq_len differs: the message names it (the old one printed layers and d_model,
  // the same on both sides).
  ModelConfig longer = TinyConfig();
  longer.seq_len = TinyConfig().seq_len * 2;
  StageModule longer_module(longer, 1);
  absl::Status wrong_len = RestoreStageState(bytes, longer_module, nullptr, kPeer).status();
  EXPECT_NE(wrong_len.message().find(absl::StrCat("seq_len ", TinyConfig().seq_len, " vs ",
                                                  longer.seq_len)),
            std::string::npos)
      << wrong_len;
  EXPECT_EQ(ParameterDigest(m), before);
  EXPECT_EQ(LoadStageCheckpoint(TempPath("missing.ckpt"), m, nullptr).status().code(),
            absl::StatusCode::kNotFound);
}

// A checkpoint of a diverged run (NaN weights) used to load and evaluate
// to NaN with exit 0; it is refused and the module is left as it was.
// Note [Averaging state]: the outer state rides in the archive; a file
// without it (older, or H = 1) restores with an empty `averaging`, and the
// header (what generations check) reads the same either way.
TEST(CheckpointTest, CarriesAveragingBytesAndOlderFilesHaveNone) {
  auto pipe = LocalPipeline::Create(TinyConfig()).value();
  StageModule& m = pipe->stage(1).module();
  const std::string averaging("SSAVGST1\0\x01 outer state", 23);
  const std::string with = SerializeStageState(m, nullptr, 5, "", averaging).value();
  const std::string without = SerializeStageState(m, nullptr, 5).value();
  absl::StatusOr<CheckpointInfo> a = RestoreStageState(with, m, nullptr, kPeer);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->averaging, averaging);
  absl::StatusOr<CheckpointInfo> b = RestoreStageState(without, m, nullptr, kPeer);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(b->averaging.empty());
  EXPECT_EQ(ReadCheckpointInfo(with)->step, 5);
}

// The state is written into one buffer reserved ahead and its length
// patched in afterwards: the bytes must be exactly the format's, as an
// independent writer of the same entries (WithStateEntries) makes them,
// with the entries in their documented order.
TEST(CheckpointTest, TheStateIsItsEntriesInOrderAsTheFormatWritesThem) {
  std::unique_ptr<StageOptimizer> holder;
  StageOptimizer* opt;
  auto pipe = Trained(&opt, holder);
  StageModule& m = pipe->stage(1).module();
  const std::string averaging("SSAVGST1\0\x01 outer state", 23);
  const std::string file = SerializeStageState(m, &opt->adamw(), 3, "x", averaging).value();
  absl::StatusOr<std::vector<testing::OwnedTensorEntry>> entries = testing::StateEntries(file);
  ASSERT_TRUE(entries.ok()) << entries.status();
  EXPECT_EQ(testing::WithStateEntries(file, *entries), file);
  std::vector<std::string> names;
  for (const testing::OwnedTensorEntry& e : *entries) names.push_back(e.name);
  std::vector<std::string> want;
  for (const auto& item : m.named_parameters()) want.push_back("param/" + item.key());
  want.push_back("optimizer");
  for (const auto& item : m.named_parameters()) {
    for (const char* f : {"step", "exp_avg", "exp_avg_sq"}) {
      want.push_back(absl::StrCat("adamw/", item.key(), "/", f));
    }
  }
  want.push_back("averaging");
  EXPECT_EQ(names, want);
  EXPECT_EQ(entries->back().data, averaging);
}

// Two stages of one process save, export and import at once (two threads,
// two modules). Version 1 raced inside libtorch's archive code here (Note
// [One libtorch archive at a time]); version 2 uses no archive, and under
// --config=tsan this checks that nothing shared races (a report fails the
// test); in any build the bytes each thread made restore.
TEST(CheckpointTest, TwoModulesSaveAndRestoreAtOnce) {
  constexpr int kThreads = 2;
  constexpr int kRounds = 4;
  std::vector<std::unique_ptr<LocalPipeline>> pipes;
  std::vector<std::unique_ptr<StageOptimizer>> opts;
  for (int i = 0; i < kThreads; ++i) {
    pipes.push_back(LocalPipeline::Create(TinyConfig()).value());
    opts.push_back(std::make_unique<StageOptimizer>(pipes.back()->stage(1).module(),
                                                    OptimizerOptions()));
  }
  std::vector<int> restored(kThreads, 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      StageModule& m = pipes[i]->stage(1).module();
      for (int r = 0; r < kRounds; ++r) {
        absl::StatusOr<std::string> bytes = SerializeStageState(m, &opts[i]->adamw(), r);
        if (!bytes.ok()) continue;
        absl::StatusOr<CheckpointInfo> info = RestoreStageState(*bytes, m, &opts[i]->adamw(), kPeer);
        if (info.ok() && info->step == r) ++restored[i];
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) EXPECT_EQ(restored[i], kRounds) << "thread " << i;
}

TEST(CheckpointTest, RefusesNonFiniteWeights) {
  std::unique_ptr<StageOptimizer> h;
  StageOptimizer* o;
  auto pipe = Trained(&o, h);
  StageModule& m = pipe->stage(1).module();
  const std::string before = ParameterDigest(m);
  auto fresh = LocalPipeline::Create(TinyConfig()).value();
  StageModule& poisoned = fresh->stage(1).module();
  {
    c10::NoGradGuard no_grad;
    poisoned.named_parameters().begin()->value().fill_(std::nanf(""));
  }
  const std::string path = TempPath("nan.ckpt");
  ASSERT_TRUE(SaveStageCheckpoint(path, poisoned, nullptr, 1, "").ok());
  absl::Status s = LoadStageCheckpoint(path, m, nullptr).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("non-finite"), std::string::npos) << s;
  EXPECT_EQ(ParameterDigest(m), before);
}

// The AdamW state of `opt` as (name, step, exp_avg, exp_avg_sq) per
// parameter of `m` that has state.
struct AdamWEntry {
  std::string name;
  int64_t step;
  at::Tensor exp_avg, exp_avg_sq;
};
std::vector<AdamWEntry> AdamWStateOf(StageModule& m, torch::optim::AdamW& opt) {
  std::vector<AdamWEntry> out;
  for (const auto& item : m.named_parameters()) {
    auto it = opt.state().find(compat::OptimizerStateKey(item.value()));
    if (it == opt.state().end()) continue;
    const auto& st = static_cast<const torch::optim::AdamWParamState&>(*it->second);
    out.push_back({item.key(), st.step(), st.exp_avg().clone(), st.exp_avg_sq().clone()});
  }
  return out;
}

void ExpectSameAdamWState(const std::vector<AdamWEntry>& a, const std::vector<AdamWEntry>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_EQ(a[i].step, b[i].step) << a[i].name;
    EXPECT_TRUE(a[i].exp_avg.equal(b[i].exp_avg)) << a[i].name;
    EXPECT_TRUE(a[i].exp_avg_sq.equal(b[i].exp_avg_sq)) << a[i].name;
  }
}

TEST(CheckpointTest, RoundTripKeepsAdamWStateBitEqual) {
  std::unique_ptr<StageOptimizer> h1;
  StageOptimizer* o1;
  auto p1 = Trained(&o1, h1);
  const std::string bytes = SerializeStageState(p1->stage(1).module(), &o1->adamw(), 1).value();
  StageModule m2(TinyConfig(), 1);
  StageOptimizer o2(m2, OptimizerOptions());
  ASSERT_TRUE(RestoreStageState(bytes, m2, &o2.adamw(), kPeer).ok());
  const std::vector<AdamWEntry> saved = AdamWStateOf(p1->stage(1).module(), o1->adamw());
  EXPECT_EQ(saved.size(), p1->stage(1).module().parameters().size());
  ExpectSameAdamWState(saved, AdamWStateOf(m2, o2.adamw()));
  EXPECT_EQ(ParameterDigest(m2), ParameterDigest(p1->stage(1).module()));
  // The same bytes again: what was restored serialises as it was saved.
  EXPECT_EQ(SerializeStageState(m2, &o2.adamw(), 1).value(), bytes);
}

// A checkpoint whose weights are fine but whose optimizer state does not
// fit this stage's parameters (a moment of the wrong shape or dtype) is
// refused before anything is copied: the weights and the optimizer's state
// stay as they were. (Version 1 handed the optimizer state to libtorch,
// which checked only the groups' sizes, and loaded any moment's shape.)
TEST(CheckpointTest, AnOptimizerStateOfTheWrongShapeChangesNothing) {
  std::unique_ptr<StageOptimizer> hd, ht;
  StageOptimizer *donor_opt, *target_opt;
  auto donor = Trained(&donor_opt, hd);
  auto target = Trained(&target_opt, ht);
  {
    c10::NoGradGuard no_grad;
    for (auto& p : donor->stage(1).module().parameters()) p.add_(1.0);
  }
  const std::string good =
      SerializeStageState(donor->stage(1).module(), &donor_opt->adamw(), 3).value();
  StageModule& m = target->stage(1).module();
  const std::string before = SerializeStageState(m, &target_opt->adamw(), 0).value();
  std::vector<testing::OwnedTensorEntry> entries = testing::StateEntries(good).value();
  int rewritten = 0;
  for (auto& e : entries) {
    if (absl::EndsWith(e.name, "/exp_avg") && e.dims.size() == 2 && rewritten == 0) {
      e.dims[0] -= 1;  // one row short, its data sized to match
      e.data.resize(e.data.size() / (e.dims[0] + 1) * e.dims[0]);
      ++rewritten;
    }
  }
  ASSERT_EQ(rewritten, 1);
  absl::Status s = RestoreStageState(testing::WithStateEntries(good, entries), m,
                                     &target_opt->adamw(), kPeer).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("wrong shape"), std::string::npos) << s;
  EXPECT_EQ(SerializeStageState(m, &target_opt->adamw(), 0).value(), before);

  // The right shape in float64: the wrong dtype.
  entries = testing::StateEntries(good).value();
  for (auto& e : entries) {
    if (absl::EndsWith(e.name, "/exp_avg_sq")) {
      e.dtype = TensorDtype::kFloat64;
      e.data += e.data;
      break;
    }
  }
  s = RestoreStageState(testing::WithStateEntries(good, entries), m, &target_opt->adamw(), kPeer)
          .status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_EQ(SerializeStageState(m, &target_opt->adamw(), 0).value(), before);

  // Another stage's optimizer cannot be saved with this stage's weights.
  StageModule other(TinyConfig(), 0);
  StageOptimizer other_opt(other, OptimizerOptions());
  EXPECT_EQ(SerializeStageState(m, &other_opt.adamw(), 3).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CheckpointTest, RefusesUnknownMissingAndOversizedEntries) {
  StageModule m(TinyConfig(), 1);
  StageOptimizer o(m, OptimizerOptions());
  const std::string good = SerializeStageState(m, &o.adamw(), 3).value();
  const std::string before = ParameterDigest(m);
  std::vector<testing::OwnedTensorEntry> entries = testing::StateEntries(good).value();

  std::vector<testing::OwnedTensorEntry> unknown = entries;
  unknown.push_back({"param/not.a.parameter", TensorDtype::kUInt8, {1}, "x"});
  absl::Status s =
      RestoreStageState(testing::WithStateEntries(good, unknown), m, &o.adamw(), kPeer).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("unknown entry"), std::string::npos) << s;

  std::vector<testing::OwnedTensorEntry> missing(entries.begin() + 1, entries.end());
  s = RestoreStageState(testing::WithStateEntries(good, missing), m, &o.adamw(), kPeer).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("missing parameter"), std::string::npos) << s;

  // A length longer than what is left (the CRC rewritten, as a hostile peer would).
  std::vector<testing::OwnedTensorEntry> cut = entries;
  cut.back().data.pop_back();
  s = RestoreStageState(testing::WithStateEntries(good, cut), m, &o.adamw(), kPeer).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_EQ(ParameterDigest(m), before);
}

TEST(CheckpointTest, OnlyAdamWStateIsStored) {
  StageModule m(TinyConfig(), 1);
  torch::optim::SGD sgd(m.parameters(), torch::optim::SGDOptions(0.1));
  EXPECT_EQ(SerializeStageState(m, &sgd, 1).status().code(), absl::StatusCode::kUnimplemented);
  StageOptimizer o(m, OptimizerOptions());
  const std::string bytes = SerializeStageState(m, &o.adamw(), 1).value();
  EXPECT_EQ(RestoreStageState(bytes, m, &sgd, kPeer).status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(RestoreStageState(bytes, m, nullptr, kPeer).ok());
}

// model/testdata/v1_stage1_adamw.ckpt was written by the version-1 code
// (make_checkpoint_seeds' stage1_adamw: stage 1 of the tiny model after
// one AdamW step of gradients of ones, step 5, extra "data 17").
constexpr char kV1File[] = "model/testdata/v1_stage1_adamw.ckpt";

// The module and AdamW the version-1 fixture was saved from.
void FixtureSource(StageModule& m, StageOptimizer& o) {
  for (auto& p : m.parameters()) p.mutable_grad() = at::ones_like(p);
  o.adamw().step();
}

TEST(CheckpointTest, LoadsAVersionOneFileFromDisk) {
  StageModule m(TinyConfig(), 1), source(TinyConfig(), 1);
  StageOptimizer o(m, OptimizerOptions()), source_opt(source, OptimizerOptions());
  FixtureSource(source, source_opt);
  EXPECT_EQ(ReadCheckpointInfo(common::ReadFileBytes(kV1File).value())->step, 5);
  absl::StatusOr<CheckpointInfo> info = LoadStageCheckpoint(kV1File, m, &o.adamw());
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->step, 5);
  EXPECT_EQ(info->extra, "data 17");
  EXPECT_EQ(ParameterDigest(m), ParameterDigest(source));
  ExpectSameAdamWState(AdamWStateOf(m, o.adamw()), AdamWStateOf(source, source_opt.adamw()));
  // Saved again it is version 2, which a peer may send.
  const std::string v2 = SerializeStageState(m, &o.adamw(), 5).value();
  StageModule joiner(TinyConfig(), 1);
  StageOptimizer joiner_opt(joiner, OptimizerOptions());
  ASSERT_TRUE(RestoreStageState(v2, joiner, &joiner_opt.adamw(), kPeer).ok());
  EXPECT_EQ(ParameterDigest(joiner), ParameterDigest(source));
}

TEST(CheckpointTest, RefusesVersionOneFromAPeer) {
  const std::string v1 = common::ReadFileBytes(kV1File).value();
  StageModule m(TinyConfig(), 1);
  StageOptimizer o(m, OptimizerOptions());
  const std::string before = SerializeStageState(m, &o.adamw(), 0).value();
  absl::Status s = RestoreStageState(v1, m, &o.adamw(), kPeer).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("version 1"), std::string::npos) << s;
  EXPECT_EQ(SerializeStageState(m, &o.adamw(), 0).value(), before);
  // The same bytes from the user's own disk load.
  EXPECT_TRUE(RestoreStageState(v1, m, &o.adamw(), StateSource::kLocalFile).ok());
}

TEST(ParameterDigestTest, ChangesWithAnyParameter) {
  StageModule a(TinyConfig(), 2), b(TinyConfig(), 2);
  EXPECT_EQ(ParameterDigest(a), ParameterDigest(b));
  EXPECT_EQ(ParameterDigest(a).size(), 64u);
  {
    c10::NoGradGuard g;
    b.parameters().back()[0].add_(1e-6);
  }
  EXPECT_NE(ParameterDigest(a), ParameterDigest(b));
}

}  // namespace
}  // namespace skipswarm::model
