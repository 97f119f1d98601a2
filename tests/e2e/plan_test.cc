// `skipswarm plan --planner=all` on SkipPipe's published 20-node schedule:
// the comparison table with SkipPipe's figures (README "Planner").
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/harness/skipswarm_process.h"

namespace skipswarm::tests {
namespace {

TEST(PlanTest, AllPlannersTableHasSkipPipesIterationTime) {
  const std::string dir = *MakeTestDir("plan");
  absl::StatusOr<ProcessResult> r = RunSkipswarm(
      {"plan", "--scenario=" + RunfilePath("scheduler/testdata/skippipe_gcp20_schedule.json"),
       "--planner=all"},
      dir);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->exit_code, 0) << r->out << r->err;
  EXPECT_TRUE(absl::StrContains(r->out, "20 nodes, 6 stages, 5 data nodes")) << r->out;
  EXPECT_TRUE(absl::StrContains(r->out, "lower bound: 32.484 s")) << r->out;

  // planner -> its row's columns.
  std::map<std::string, std::vector<std::string>> rows;
  bool in_table = false;
  for (const std::string& line : Lines(r->out)) {
    std::vector<std::string> cols = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (!cols.empty() && cols[0] == "planner") {
      in_table = true;
      ASSERT_GE(cols.size(), 5u) << line;
      EXPECT_EQ(cols[1], "iteration_s");
      EXPECT_EQ(cols[4], "valid");
      continue;
    }
    if (in_table && cols.size() >= 6 && !absl::StartsWith(line, "(")) rows[cols[0]] = cols;
  }
  ASSERT_EQ(rows.count("skippipe"), 1u) << r->out;
  EXPECT_EQ(rows["skippipe"][1], "32.484") << r->out;
  EXPECT_EQ(rows["skippipe"][2], "1.000") << r->out;
  // The deterministic planners' figures (noskip's anytime search depends
  // on the machine's speed, so only its validity is checked).
  ASSERT_EQ(rows.count("pipeline"), 1u) << r->out;
  EXPECT_EQ(rows["pipeline"][1], "80.870");
  ASSERT_EQ(rows.count("replay:ca-paths"), 1u) << r->out;
  EXPECT_EQ(rows["replay:ca-paths"][1], "32.924");
  for (const char* p : {"pipeline", "noskip", "random", "skippipe", "replay:ca-paths"}) {
    ASSERT_EQ(rows.count(p), 1u) << p << "\n" << r->out;
    EXPECT_EQ(rows[p][4], "yes") << p;
  }
}

}  // namespace
}  // namespace skipswarm::tests
