// `skipswarm sim` on shipped scenarios: a JSON report with the documented
// fields (sim/README.md), and the same bytes for the same seed.
#include <string>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/harness/skipswarm_process.h"

namespace skipswarm::tests {
namespace {

using json = nlohmann::json;

TEST(SimTest, ChurnScenarioWritesAReportWithTheExpectedFields) {
  const std::string dir = *MakeTestDir("sim_fields");
  absl::StatusOr<ProcessResult> r =
      RunSkipswarm({"sim", "--scenario=" + RunfilePath("sim/scenarios/small-churn.json"),
                    "--seed=1", "--sim_report=" + dir + "/report.json",
                    "--sim_svg=" + dir + "/report.svg", "--sim_progress=false"},
                   dir);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->exit_code, 0) << r->out << r->err;
  EXPECT_TRUE(absl::StrContains(r->out, "small-churn: 6 iterations")) << r->out;

  absl::StatusOr<std::string> text = ReadFile(dir + "/report.json");
  ASSERT_TRUE(text.ok()) << text.status();
  const json report = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(report.is_discarded()) << *text;
  for (const char* key : {"scenario", "seed", "planner", "detection", "summary", "iterations",
                          "failures", "nodes", "churn", "stage_visits"}) {
    EXPECT_TRUE(report.contains(key)) << key;
  }
  EXPECT_EQ(report.value("seed", -1), 1);
  EXPECT_EQ(report.value("planner", ""), "skippipe");
  ASSERT_TRUE(report["summary"].is_object());
  const json& s = report["summary"];
  for (const char* key : {"iterations", "total_s", "mean_iteration_s", "mbs", "mbs_completed",
                          "mbs_dropped", "mbs_rerouted", "failures", "max_detect_s"}) {
    EXPECT_TRUE(s.contains(key)) << key;
  }
  // The scenario: 8 nodes, 6 iterations of 8 micro-batches, one kill.
  EXPECT_EQ(s.value("iterations", -1), 6);
  EXPECT_EQ(s.value("mbs", -1), 48);
  EXPECT_EQ(s.value("mbs_completed", -1) + s.value("mbs_dropped", -1), 48);
  EXPECT_GE(s.value("failures", -1), 1);
  EXPECT_GT(s.value("total_s", 0.0), 0.0);
  ASSERT_TRUE(report["iterations"].is_array());
  EXPECT_EQ(report["iterations"].size(), 6u);

  absl::StatusOr<std::string> svg = ReadFile(dir + "/report.svg");
  ASSERT_TRUE(svg.ok()) << svg.status();
  EXPECT_TRUE(absl::StrContains(*svg, "<svg"));
}

// small-churn has a kill, a straggler, a join and real SWIM gossip, so
// the report depends on every seeded draw and on event order.
TEST(SimTest, SameSeedGivesTheSameReportBytes) {
  const std::string dir = *MakeTestDir("sim_determinism");
  std::string reports[2];
  for (int run = 0; run < 2; ++run) {
    const std::string path = dir + "/report-" + std::to_string(run) + ".json";
    absl::StatusOr<ProcessResult> r =
        RunSkipswarm({"sim", "--scenario=" + RunfilePath("sim/scenarios/small-churn.json"),
                      "--seed=7", "--sim_report=" + path, "--sim_svg=", "--sim_progress=false"},
                     dir);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->exit_code, 0) << r->out << r->err;
    absl::StatusOr<std::string> text = ReadFile(path);
    ASSERT_TRUE(text.ok()) << text.status();
    reports[run] = *text;
  }
  EXPECT_GT(reports[0].size(), 1000u);
  EXPECT_TRUE(reports[0] == reports[1]) << "reports differ in size or bytes ("
                                        << reports[0].size() << " vs " << reports[1].size()
                                        << ")";
}

}  // namespace
}  // namespace skipswarm::tests
