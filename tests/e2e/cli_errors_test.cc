// Usage errors of the `skipswarm` binary: a broken --config file, an
// unknown key, flag or command each exit non-zero (2: usage) with a
// message that names the culprit, before any work starts.
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/harness/skipswarm_process.h"

namespace skipswarm::tests {
namespace {

// Runs `skipswarm args...` in a fresh folder holding `config` as c.json.
ProcessResult RunWithConfig(const std::string& test, const std::string& config,
                            const std::vector<std::string>& args) {
  const std::string dir = *MakeTestDir(test);
  EXPECT_TRUE(WriteFile(dir + "/c.json", config).ok());
  absl::StatusOr<ProcessResult> r = RunSkipswarm(args, dir);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : ProcessResult{};
}

TEST(CliErrorsTest, BrokenJsonConfigNamesTheFileLineAndColumn) {
  const ProcessResult r = RunWithConfig(
      "broken_json", "{\n  \"planner\": \"all\",\n  \"budget_ms\": fifty\n}\n",
      {"plan", "--config=c.json"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "config file 'c.json' is not valid JSON")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "line 3, column")) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST(CliErrorsTest, UnknownConfigKeyIsNamed) {
  const ProcessResult r =
      RunWithConfig("unknown_key", "{\n  \"no_such_flag\": 1\n}\n", {"plan", "--config=c.json"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "unknown key 'no_such_flag' for 'skipswarm plan'"))
      << r.err;
}

TEST(CliErrorsTest, BadConfigValueNamesTheKey) {
  const ProcessResult r = RunWithConfig("bad_value", "{\n  \"budget_ms\": \"soon\"\n}\n",
                                        {"plan", "--config=c.json"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "key 'budget_ms': bad value \"soon\"")) << r.err;
}

TEST(CliErrorsTest, MissingConfigFileIsNamed) {
  const ProcessResult r = RunWithConfig("missing_config", "{}", {"plan", "--config=absent.json"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "cannot open config file 'absent.json'")) << r.err;
}

TEST(CliErrorsTest, UnknownFlagIsNamed) {
  const ProcessResult r = RunWithConfig("unknown_flag", "{}", {"plan", "--no_such_flag=3"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "unknown flag --no_such_flag for 'skipswarm plan'"))
      << r.err;
}

TEST(CliErrorsTest, UnknownCommandIsNamedAndTheCommandsListed) {
  const ProcessResult r = RunWithConfig("unknown_command", "{}", {"frobnicate"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "unknown command 'frobnicate'")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err + r.out, "commands:")) << r.err << r.out;
}

TEST(CliErrorsTest, HelpAndVersionExitZero) {
  const ProcessResult help = RunWithConfig("help", "{}", {"help"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  for (const char* command : {"plan", "train-ref", "eval", "sim", "node", "local", "keygen"}) {
    EXPECT_TRUE(absl::StrContains(help.out, std::string("\n  ") + command + " "))
        << command << "\n" << help.out;
  }
  const ProcessResult version = RunWithConfig("version", "{}", {"version"});
  EXPECT_EQ(version.exit_code, 0) << version.err;
  EXPECT_NE(version.out, "");
}

}  // namespace
}  // namespace skipswarm::tests
