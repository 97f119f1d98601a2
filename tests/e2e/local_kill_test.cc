// `skipswarm local --kill=NAME@ITER`: a replica is SIGKILLed mid-run and
// the swarm still completes every iteration (the survivors re-route its
// work), while the launcher announces the kill and prints its re-route and
// drop counts.
#include <cmath>
#include <regex>
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

constexpr int kIterations = 40;

TEST(LocalKillTest, SwarmFinishesEveryIterationAfterAReplicaIsKilled) {
  const std::string dir = *MakeTestDir("local_kill");
  std::vector<std::string> args = TinyModelArgs("local");
  // Killed early: the launcher polls every 200 ms, so the kill must come
  // well before the last iteration even on a loaded machine.
  args.insert(args.end(), {"--local_dir=" + dir + "/run",
                           "--local_iterations=" + std::to_string(kIterations),
                           "--kill=s1r1@5"});
  absl::StatusOr<ProcessResult> r = RunSkipswarm(args, dir);
  ASSERT_TRUE(r.ok()) << r.status();
  // Exit 0 also says every node but the killed one exited cleanly.
  ASSERT_EQ(r->exit_code, 0) << r->out << r->err;

  // The kill is announced, after the iteration it was asked for.
  std::smatch m;
  const std::regex killed(R"(killing s1r1 \(SIGKILL\) after iteration (\d+))");
  ASSERT_TRUE(std::regex_search(r->out, m, killed)) << r->out;
  const int killed_after = std::stoi(m[1].str());
  EXPECT_GE(killed_after, 5);
  EXPECT_LT(killed_after, kIterations - 1) << "the kill came after training ended";
  absl::StatusOr<std::string> kills = ReadFile(dir + "/run/kills.log");
  ASSERT_TRUE(kills.ok()) << kills.status();
  EXPECT_TRUE(absl::StrContains(*kills, "s1r1 after iteration")) << *kills;

  // The last progress line reports every iteration and the counts.
  const std::vector<std::string> lines = Lines(r->out);
  const std::regex progress(
      R"(it (\d+)/(\d+) [0-9.]+ it/s ETA \S+ loss ([0-9.]+) [0-9]+ tok/s re-routed (\d+) )"
      R"(dropped (\d+))");
  int last_it = -1, rerouted = -1, dropped = -1;
  for (const std::string& line : lines) {
    if (std::regex_search(line, m, progress)) {
      last_it = std::stoi(m[1].str());
      EXPECT_EQ(std::stoi(m[2].str()), kIterations);
      rerouted = std::stoi(m[4].str());
      dropped = std::stoi(m[5].str());
    }
  }
  EXPECT_EQ(last_it, kIterations) << r->out;
  ASSERT_GE(rerouted, 0) << "no re-route count printed:\n" << r->out;
  ASSERT_GE(dropped, 0) << "no drop count printed:\n" << r->out;
  std::printf("killed after iteration %d; re-routed %d, dropped %d\n", killed_after, rerouted,
              dropped);

  // loss.csv has every iteration, a finite loss in each, and the drops
  // that the progress line summed.
  absl::StatusOr<std::string> csv = ReadFile(dir + "/run/loss.csv");
  ASSERT_TRUE(csv.ok()) << csv.status();
  const std::vector<std::string> rows = Lines(*csv);
  ASSERT_EQ(rows.size(), static_cast<size_t>(kIterations + 1)) << *csv;
  int csv_dropped = 0;
  for (int i = 1; i <= kIterations; ++i) {
    std::vector<std::string> f = absl::StrSplit(rows[i], ',');
    // iteration, loss, dropped, elapsed_s, rerouted, avg_bytes (bytes this
    // iteration's replica averaging put on the wire: a count, never negative).
    ASSERT_EQ(f.size(), 6u) << rows[i];
    double avg_bytes = -1;
    EXPECT_TRUE(absl::SimpleAtod(f[5], &avg_bytes) && avg_bytes >= 0) << rows[i];
    int64_t it;
    double loss;
    int d;
    ASSERT_TRUE(absl::SimpleAtoi(f[0], &it) && absl::SimpleAtod(f[1], &loss) &&
                absl::SimpleAtoi(f[2], &d))
        << rows[i];
    EXPECT_EQ(it, i - 1);
    EXPECT_TRUE(std::isfinite(loss)) << rows[i];
    csv_dropped += d;
  }
  EXPECT_EQ(csv_dropped, dropped);
  // The plot marks the kill.
  absl::StatusOr<std::string> svg = ReadFile(dir + "/run/loss.svg");
  ASSERT_TRUE(svg.ok()) << svg.status();
  EXPECT_TRUE(absl::StrContains(*svg, " killed</title>")) << *svg;
}

}  // namespace
}  // namespace skipswarm::tests
