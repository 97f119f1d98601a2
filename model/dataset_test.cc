#include "model/dataset.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace skipswarm::model {
namespace {

std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(base ? base : "/tmp") + "/" + name;
  std::filesystem::create_directories(dir);
  return dir;
}

void Write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

TEST(ByteTokenizerTest, RoundTripsBytes) {
  ByteTokenizer tok;
  std::string text = "caf\xc3\xa9 \x01";
  std::vector<int32_t> ids = tok.Encode(text);
  EXPECT_EQ(ids.size(), text.size());
  EXPECT_EQ(ids[3], 0xc3);
  EXPECT_EQ(tok.Decode(ids), text);
}

TEST(DatasetTest, ListsFilesSkippingIndexesAliasesAndOff) {
  std::string dir = TempDir("corpus_list");
  std::filesystem::create_directories(dir + "/off");
  std::filesystem::create_directories(dir + "/sub");
  Write(dir + "/b", "bbb");
  Write(dir + "/a", "aaa");
  Write(dir + "/a.dat", "index");
  Write(dir + "/a.u8", "alias");
  Write(dir + "/off/rude", "no");
  Write(dir + "/sub/c", "ccc");
  auto files = ListCorpusFiles({dir});
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->size(), 3u);
  EXPECT_EQ((*files)[0], dir + "/a");
  EXPECT_EQ((*files)[2], dir + "/sub/c");
  EXPECT_EQ(ListCorpusFiles({dir + "/missing"}).status().code(), absl::StatusCode::kNotFound);
}

TEST(DatasetTest, SplitIsDeterministicAndCoversEverything) {
  std::string dir = TempDir("corpus_split");
  std::string text;
  for (int i = 0; i < 20000; ++i) text += static_cast<char>('a' + i % 26);
  Write(dir + "/t", text);
  CorpusOptions opts;
  opts.paths = {dir};
  opts.validation_fraction = 0.2;
  opts.chunk_bytes = 100;
  auto a = LoadCorpus(opts, ByteTokenizer()).value();
  auto b = LoadCorpus(opts, ByteTokenizer()).value();
  EXPECT_EQ(a.train, b.train);
  EXPECT_EQ(a.validation, b.validation);
  EXPECT_EQ(a.train.size() + a.validation.size(), text.size());
  EXPECT_GT(a.validation.size(), 2000u);
  EXPECT_LT(a.validation.size(), 6000u);
}

TEST(DatasetTest, SmallCorpusStillHoldsOutValidation) {
  std::string dir = TempDir("corpus_small");
  Write(dir + "/t", std::string(3 * 4096 + 10, 'x'));
  CorpusOptions opts;
  opts.paths = {dir};
  auto c = LoadCorpus(opts, ByteTokenizer()).value();
  EXPECT_GT(c.validation.size(), 0u);
  EXPECT_GT(c.train.size(), 0u);
}

TEST(DatasetTest, DefaultCorpusIsTheFortunes) {
  if (!std::filesystem::exists(kDefaultCorpusDir)) GTEST_SKIP() << "fortunes not installed";
  auto corpus = LoadCorpus(CorpusOptions(), ByteTokenizer());
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  EXPECT_GT(corpus->train.size(), 1'000'000u);
  EXPECT_GT(corpus->validation.size(), 50'000u);
  for (const auto& f : corpus->files) EXPECT_EQ(f.find("/off/"), std::string::npos);
}

TEST(MicroBatchSamplerTest, DeterministicShiftedAndInsideItsShard) {
  std::vector<int32_t> tokens(10000);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i % 251);
  SamplerOptions o;
  o.samples_per_mb = 3;
  o.seq_len = 16;
  o.seed = 9;
  o.num_shards = 4;
  std::vector<std::pair<size_t, size_t>> ranges;
  for (int shard = 0; shard < 4; ++shard) {
    o.shard_index = shard;
    auto s = MicroBatchSampler::Create(tokens, o).value();
    ranges.push_back({s->begin(), s->end()});
    MicroBatch a = s->Get(5), b = s->Get(5), c = s->Get(6);
    EXPECT_TRUE(a.tokens.equal(b.tokens));
    EXPECT_FALSE(a.tokens.equal(c.tokens));
    EXPECT_EQ(a.tokens.sizes(), (std::vector<int64_t>{3, 16}));
    EXPECT_TRUE(a.targets.slice(1, 0, 15).equal(a.tokens.slice(1, 1, 16)));
  }
  for (int shard = 1; shard < 4; ++shard) EXPECT_EQ(ranges[shard - 1].second, ranges[shard].first);
  o.shard_index = 4;
  EXPECT_FALSE(MicroBatchSampler::Create(tokens, o).ok());
  std::vector<int32_t> tiny(10);
  o.shard_index = 0;
  EXPECT_FALSE(MicroBatchSampler::Create(tiny, o).ok());
}

TEST(MicroBatchSamplerTest, ShardsNeverOverlap) {
  std::vector<int32_t> tokens(4000);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i);  // unique ids
  SamplerOptions o;
  o.samples_per_mb = 4;
  o.seq_len = 8;
  o.num_shards = 2;
  auto s0 = MicroBatchSampler::Create(tokens, o).value();
  o.shard_index = 1;
  auto s1 = MicroBatchSampler::Create(tokens, o).value();
  for (int i = 0; i < 100; ++i) {
    EXPECT_LT(s0->Get(i).targets.max().item<int64_t>(), 2000);
    EXPECT_GE(s1->Get(i).tokens.min().item<int64_t>(), 2000);
  }
}

TEST(ValidationBatchesTest, AllWindowsInOrder) {
  std::vector<int32_t> tokens(100);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i);
  for (int max_batches : {0, 4, 100}) {
    std::vector<MicroBatch> b = ValidationBatches(tokens, 2, 10, max_batches);
    ASSERT_EQ(b.size(), 4u) << max_batches;  // 4 * 20 + 1 <= 100 < 5 * 20 + 1
    EXPECT_EQ(b[1].tokens[0][0].item<int64_t>(), 20);
    EXPECT_EQ(b[1].targets[1][9].item<int64_t>(), 40);
  }
}

TEST(ValidationBatchesTest, ShortSampleIsSpreadOverTheSplit) {
  std::vector<int32_t> tokens(1001);  // 100 windows of 10 tokens
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i);
  std::vector<MicroBatch> b = ValidationBatches(tokens, 1, 10, 4);
  ASSERT_EQ(b.size(), 4u);
  // Windows 0, 25, 50, 75: the sample reaches the end of the split.
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(b[i].tokens[0][0].item<int64_t>(), 250 * i);
    EXPECT_EQ(b[i].targets[0][9].item<int64_t>(), 250 * i + 10);
  }
}

TEST(ValidationBatchesTest, TooShortGivesNothing) {
  std::vector<int32_t> tokens(20);
  EXPECT_TRUE(ValidationBatches(tokens, 2, 10, 0).empty());  // needs 21
}

}  // namespace
}  // namespace skipswarm::model
