#include "sim/sim_command.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "gtest/gtest.h"

ABSL_DECLARE_FLAG(std::string, sim_scenario);
ABSL_DECLARE_FLAG(uint64_t, sim_seed);
ABSL_DECLARE_FLAG(std::string, sim_report);
ABSL_DECLARE_FLAG(std::string, sim_svg);
ABSL_DECLARE_FLAG(bool, sim_progress);

namespace skipswarm::sim {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(SimCommandTest, WritesByteIdenticalReportsForTheSameSeed) {
  const std::string dir = std::getenv("TEST_TMPDIR");
  absl::SetFlag(&FLAGS_sim_scenario, "sim/scenarios/small-churn.json");
  absl::SetFlag(&FLAGS_sim_seed, 11);
  absl::SetFlag(&FLAGS_sim_progress, false);
  common::cli::Command cmd = SimCommand();
  EXPECT_EQ(cmd.name, "sim");
  for (const char* run : {"a", "b"}) {
    absl::SetFlag(&FLAGS_sim_report, dir + "/" + run + ".json");
    absl::SetFlag(&FLAGS_sim_svg, dir + "/" + run + ".svg");
    ASSERT_EQ(cmd.run({}), 0);
  }
  const std::string a = Slurp(dir + "/a.json");
  EXPECT_NE(a.find("\"scenario\""), std::string::npos);
  EXPECT_EQ(a, Slurp(dir + "/b.json"));
  EXPECT_EQ(Slurp(dir + "/a.svg"), Slurp(dir + "/b.svg"));
  EXPECT_NE(Slurp(dir + "/a.svg").find("<svg"), std::string::npos);
}

TEST(SimCommandTest, BadScenarioFailsWithExitCode1) {
  absl::SetFlag(&FLAGS_sim_scenario, "sim/scenarios/no-such-file.json");
  EXPECT_EQ(SimCommand().run({}), 1);
}

}  // namespace
}  // namespace skipswarm::sim
