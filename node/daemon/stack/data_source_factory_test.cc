#include "node/daemon/stack/data_source_factory.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace skipswarm::node {
namespace {

NodeDaemonOptions Options() {
  NodeDaemonOptions o;
  o.model.model.seq_len = 8;
  o.model.samples_per_mb = 2;
  o.model.seed = 3;
  return o;
}

TEST(DataSourceFactoryTest, TimedComputeGetsSyntheticDataAndNoCorpus) {
  NodeDaemonOptions o = Options();
  o.wan.timed_forward_s = 0.1;
  o.model.corpus.paths = {"/nonexistent/corpus"};  // never read
  auto data = CreateDataNodeData(o);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->corpus, nullptr);
  auto mb = data->source->Get(0);
  ASSERT_TRUE(mb.ok()) << mb.status();
  EXPECT_EQ(mb->samples, 2);
  EXPECT_EQ(mb->seq, 8);
}

TEST(DataSourceFactoryTest, SamplesTheCorpusItOwns) {
  const std::string path =
      (std::filesystem::path(std::getenv("TEST_TMPDIR")) / "corpus.txt").string();
  {
    std::ofstream f(path);
    for (int i = 0; i < 200; ++i) f << "the quick brown fox jumps over the lazy dog " << i << "\n";
  }
  NodeDaemonOptions o = Options();
  o.model.corpus.paths = {path};
  auto data = CreateDataNodeData(o);
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_NE(data->corpus, nullptr);
  EXPECT_FALSE(data->corpus->train.empty());
  // Moving the pair keeps the sampler's borrowed tokens where they were.
  DataNodeData moved = *std::move(data);
  auto mb = moved.source->Get(5);
  ASSERT_TRUE(mb.ok()) << mb.status();
  EXPECT_EQ(mb->tokens.size(), 2u * 8u);
}

TEST(DataSourceFactoryTest, RefusesAVocabularySmallerThanTheTokenizers) {
  NodeDaemonOptions o = Options();
  o.model.model.vocab_size = 100;  // the byte tokenizer has 256
  auto data = CreateDataNodeData(o);
  EXPECT_EQ(data.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(data.status().message().find("--vocab=100 is smaller than"), std::string::npos)
      << data.status();
}

}  // namespace
}  // namespace skipswarm::node
