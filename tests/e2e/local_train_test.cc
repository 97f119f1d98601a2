// `skipswarm local`, the README's main job, with a model small enough for
// CI: real node processes on loopback train it, the loss falls, and the
// launcher leaves its outputs in --local_dir.
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/e2e/tiny_model.h"
#include "tests/harness/skipswarm_process.h"

namespace skipswarm::tests {
namespace {

TEST(LocalTrainTest, TinySwarmTrainsAndWritesItsOutputs) {
  const std::string dir = *MakeTestDir("local_train");
  std::vector<std::string> args = TinyModelArgs("local");
  args.insert(args.end(), {"--local_dir=" + dir + "/run", "--local_iterations=20"});
  absl::StatusOr<ProcessResult> r = RunSkipswarm(args, dir);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->exit_code, 0) << r->out << r->err;
  EXPECT_TRUE(absl::StrContains(r->out, "6 nodes (2 data nodes, 2 stages x 2 replicas)"))
      << r->out;
  EXPECT_TRUE(absl::StrContains(r->out, "it 20/20")) << r->out;
  EXPECT_TRUE(absl::StrContains(r->out, "outputs: " + dir + "/run/loss.svg")) << r->out;
  // The first node served its status page on the port the launcher printed.
  EXPECT_TRUE(absl::StrContains(r->out, "status page of d0: http://127.0.0.1:")) << r->out;
  absl::StatusOr<std::string> d0_log = ReadFile(dir + "/run/logs/d0.err");
  ASSERT_TRUE(d0_log.ok()) << d0_log.status();
  EXPECT_TRUE(absl::StrContains(*d0_log, "status page on the same port")) << *d0_log;

  // loss.csv: a header, then one row per iteration, in order.
  absl::StatusOr<std::string> csv = ReadFile(dir + "/run/loss.csv");
  ASSERT_TRUE(csv.ok()) << csv.status();
  std::vector<std::string> lines = Lines(*csv);
  ASSERT_EQ(lines.size(), 21u) << *csv;
  EXPECT_EQ(lines[0], "iteration,loss,dropped,elapsed_s,rerouted,avg_bytes");
  std::vector<double> losses;
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> f = absl::StrSplit(lines[i], ',');
    // iteration, loss, dropped, elapsed_s, rerouted, avg_bytes (bytes this
    // iteration's replica averaging put on the wire: a count, never negative).
    ASSERT_EQ(f.size(), 6u) << lines[i];
    double avg_bytes = -1;
    EXPECT_TRUE(absl::SimpleAtod(f[5], &avg_bytes) && avg_bytes >= 0) << lines[i];
    int64_t it;
    double loss;
    ASSERT_TRUE(absl::SimpleAtoi(f[0], &it) && absl::SimpleAtod(f[1], &loss)) << lines[i];
    EXPECT_EQ(it, static_cast<int64_t>(i - 1));
    EXPECT_TRUE(std::isfinite(loss)) << lines[i];
    EXPECT_EQ(f[2], "0") << "a fault-free run drops nothing: " << lines[i];
    losses.push_back(loss);
  }
  // Byte-level loss starts near ln 256 = 5.55; 20 steps at this learning
  // rate bring it well below 4.5 (3.4..3.6 measured).
  const double first = (losses[0] + losses[1] + losses[2]) / 3;
  const double last = (losses[17] + losses[18] + losses[19]) / 3;
  EXPECT_GT(first, 5.0);
  EXPECT_LT(last, first - 1.0) << *csv;

  absl::StatusOr<std::string> svg = ReadFile(dir + "/run/loss.svg");
  ASSERT_TRUE(svg.ok()) << svg.status();
  EXPECT_TRUE(absl::StartsWith(*svg, "<svg")) << *svg;
  for (const char* node : {"d0", "d1", "s1r0", "s1r1", "s2r0", "s2r1"}) {
    EXPECT_TRUE(ReadFile(dir + "/run/logs/" + node + ".err").ok()) << node;
  }
  EXPECT_TRUE(ReadFile(dir + "/run/progress.jsonl").ok());
}

}  // namespace
}  // namespace skipswarm::tests
