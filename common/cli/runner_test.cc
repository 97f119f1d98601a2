#include "common/cli/runner.h"

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "gtest/gtest.h"

ABSL_FLAG(int, runner_test_budget, 10, "A test flag owned by the test command.");
ABSL_FLAG(bool, runner_test_fast, false, "A boolean test flag.");
// A short name that is also an own flag (Note [Short flag names]).
ABSL_FLAG(int, runner_test_fast_budget, 1, "Prefixed twin of --fast_budget.");
ABSL_FLAG(int, fast_budget, 2, "An own flag named like a prefixed one's short name.");
// runner_test_other_flags.cc: --budget, another command's.
ABSL_DECLARE_FLAG(int, budget);

namespace skipswarm::common::cli {
namespace {

Command TestCommand() {
  return {"test", "A command for tests", "skipswarm test [flags]",
          {"common/cli/runner_test.cc"},
          [](const std::vector<std::string>&) { return 0; }};
}

Command OtherCommand() {
  return {"other", "Another command", "skipswarm other", {"nowhere.cc"},
          [](const std::vector<std::string>&) { return 0; }};
}

TEST(RunnerTest, FlagsBelongToTheirCommandAndCommonFlagsToAll) {
  EXPECT_TRUE(FlagBelongsTo(TestCommand(), "runner_test_budget"));
  EXPECT_TRUE(FlagBelongsTo(TestCommand(), "config"));
  EXPECT_FALSE(FlagBelongsTo(OtherCommand(), "runner_test_budget"));
  EXPECT_TRUE(FlagBelongsTo(OtherCommand(), "log_level"));
  EXPECT_FALSE(FlagBelongsTo(TestCommand(), "no_such_flag"));
}

TEST(RunnerTest, ConfigSetsFlagsAndNamesUnknownKeys) {
  absl::SetFlag(&FLAGS_runner_test_budget, 10);
  ASSERT_TRUE(ApplyConfig(TestCommand(), {{"runner_test_budget", "42"}}, "c.json").ok());
  EXPECT_EQ(absl::GetFlag(FLAGS_runner_test_budget), 42);

  absl::Status unknown = ApplyConfig(TestCommand(), {{"budgit", "1"}}, "c.json");
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.message().find("unknown key 'budgit'"), std::string::npos);

  absl::Status other = ApplyConfig(OtherCommand(), {{"runner_test_budget", "1"}}, "c.json");
  EXPECT_FALSE(other.ok());
}

TEST(RunnerTest, BadConfigValueNamesKeyAndValue) {
  absl::Status s = ApplyConfig(TestCommand(), {{"runner_test_budget", "many"}}, "c.json");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("key 'runner_test_budget'"), std::string::npos);
  EXPECT_NE(s.message().find("\"many\""), std::string::npos);
}

TEST(RunnerTest, CommandLineFlagsAreCheckedAgainstTheCommand) {
  EXPECT_TRUE(CheckFlagsBelong(TestCommand(), {"--runner_test_budget=3", "pos"}).ok());
  EXPECT_TRUE(CheckFlagsBelong(TestCommand(), {"--norunner_test_fast"}).ok());
  EXPECT_TRUE(CheckFlagsBelong(TestCommand(), {"--", "--not-a-flag"}).ok());
  absl::Status s = CheckFlagsBelong(OtherCommand(), {"--runner_test_budget=3"});
  EXPECT_NE(s.message().find("unknown flag --runner_test_budget"), std::string::npos);
}

TEST(RunnerTest, HelpTextsListCommandsAndOwnFlags) {
  std::vector<Command> commands{TestCommand(), OtherCommand()};
  std::string top = TopLevelHelp(commands);
  EXPECT_NE(top.find("test"), std::string::npos);
  EXPECT_NE(top.find("Another command"), std::string::npos);
  std::string help = CommandHelp(TestCommand());
  EXPECT_NE(help.find("--runner_test_budget"), std::string::npos);
  EXPECT_NE(help.find("--config"), std::string::npos);
  EXPECT_EQ(CommandHelp(OtherCommand()).find("--runner_test_budget"), std::string::npos);
}

TEST(RunnerTest, RunCliDispatchesAndRejectsUnknownCommands) {
  int ran_with = -1;
  Command c = TestCommand();
  c.run = [&](const std::vector<std::string>& args) {
    ran_with = static_cast<int>(args.size());
    return 7;
  };
  char prog[] = "skipswarm", cmd[] = "test", flag[] = "--runner_test_budget=5",
       pos[] = "file.txt";
  char* argv[] = {prog, cmd, flag, pos};
  EXPECT_EQ(RunCli(4, argv, {c}), 7);
  EXPECT_EQ(ran_with, 1);
  EXPECT_EQ(absl::GetFlag(FLAGS_runner_test_budget), 5);

  char bogus[] = "bogus";
  char* argv2[] = {prog, bogus};
  EXPECT_EQ(RunCli(2, argv2, {c}), 2);
}

// main's start-up lines (the BLAS core) are logged once, after logging is set
// up and before the command; not for help or a usage error.
TEST(RunnerTest, OnStartRunsOnceBeforeTheCommandOnly) {
  std::vector<std::string> order;
  Command c = TestCommand();
  c.run = [&](const std::vector<std::string>&) {
    order.push_back("run");
    return 0;
  };
  auto on_start = [&] { order.push_back("start"); };
  char prog[] = "skipswarm", cmd[] = "test", help[] = "--help", bogus[] = "--bogus_flag";
  char* run_argv[] = {prog, cmd};
  EXPECT_EQ(RunCli(2, run_argv, {c}, on_start), 0);
  EXPECT_EQ(order, (std::vector<std::string>{"start", "run"}));
  order.clear();
  char* help_argv[] = {prog, cmd, help};
  EXPECT_EQ(RunCli(3, help_argv, {c}, on_start), 0);
  char* bad_argv[] = {prog, cmd, bogus};
  EXPECT_EQ(RunCli(3, bad_argv, {c}, on_start), 2);
  EXPECT_TRUE(order.empty());
}

TEST(RunnerTest, AliasesStandForTheCommandsFlags) {
  Command c = TestCommand();
  c.flag_aliases = {{"budget", "runner_test_budget"}};
  EXPECT_EQ(ResolveFlagAlias(c, "budget").value(), "runner_test_budget");
  EXPECT_EQ(ResolveFlagAlias(c, "other").value(), "other");
  EXPECT_TRUE(CheckFlagsBelong(c, {"--budget=3"}).ok());
  EXPECT_FALSE(CheckFlagsBelong(TestCommand(), {"--budget=3"}).ok());
  ASSERT_TRUE(ApplyConfig(c, {{"budget", "11"}}, "c.json").ok());
  EXPECT_EQ(absl::GetFlag(FLAGS_runner_test_budget), 11);
  EXPECT_NE(CommandHelp(c).find("--budget: same as --runner_test_budget"), std::string::npos);

  int ran = 0;
  c.run = [&](const std::vector<std::string>& args) {
    ran = static_cast<int>(args.size());
    return 0;
  };
  char prog[] = "skipswarm", cmd[] = "test", flag[] = "--budget=23", flag2[] = "-budget",
       value[] = "24", pos[] = "p";
  char* argv[] = {prog, cmd, flag, pos};
  EXPECT_EQ(RunCli(4, argv, {c}), 0);
  EXPECT_EQ(absl::GetFlag(FLAGS_runner_test_budget), 23);
  EXPECT_EQ(ran, 1);
  char* argv2[] = {prog, cmd, flag2, value};
  EXPECT_EQ(RunCli(4, argv2, {c}), 0);
  EXPECT_EQ(absl::GetFlag(FLAGS_runner_test_budget), 24);
}

Command PrefixedCommand() {
  Command c = TestCommand();
  c.flag_prefix = "runner_test_";
  return c;
}

Command BudgetOwner() {
  return {"owner", "Owns --budget", "skipswarm owner", {"common/cli/runner_test_other_flags.cc"},
          [](const std::vector<std::string>&) { return 0; }};
}

TEST(RunnerTest, ShortNamesStandForTheCommandsPrefixedFlags) {
  const Command c = PrefixedCommand();
  // Another command's --budget is not this command's: the prefix wins.
  EXPECT_EQ(ResolveFlagAlias(c, "budget").value(), "runner_test_budget");
  EXPECT_EQ(ResolveFlagAlias(c, "fast").value(), "runner_test_fast");
  // The old prefixed names keep working.
  EXPECT_EQ(ResolveFlagAlias(c, "runner_test_budget").value(), "runner_test_budget");
  // A short name that is also an own flag means that flag.
  EXPECT_EQ(ResolveFlagAlias(c, "fast_budget").value(), "fast_budget");
  EXPECT_EQ(ShortFlagName(c, "runner_test_fast_budget"), "runner_test_fast_budget");
  EXPECT_EQ(ShortFlagName(c, "runner_test_budget"), "budget");
  EXPECT_EQ(ShortFlagName(c, "fast_budget"), "fast_budget");
  // Unknown names stay as given, and the error names the command.
  EXPECT_EQ(ResolveFlagAlias(c, "budgit").value(), "budgit");
  absl::Status unknown = CheckFlagsBelong(c, {"--budgit=3"});
  EXPECT_NE(unknown.message().find("unknown flag --budgit for 'skipswarm test'"),
            std::string::npos)
      << unknown;
  EXPECT_TRUE(CheckFlagsBelong(c, {"--budget=3", "--nofast", "--runner_test_budget=4"}).ok());
  // Without the prefix the command does not know --budget.
  EXPECT_FALSE(CheckFlagsBelong(TestCommand(), {"--budget=3"}).ok());
}

TEST(RunnerTest, AnAliasAndThePrefixThatDisagreeAreAnError) {
  Command c = PrefixedCommand();
  c.flag_aliases = {{"budget", "runner_test_fast"}};
  absl::StatusOr<std::string> r = ResolveFlagAlias(c, "budget");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(
                "--budget is ambiguous for 'skipswarm test': it may mean --runner_test_fast or "
                "--runner_test_budget"),
            std::string::npos)
      << r.status();
  EXPECT_FALSE(CheckFlagsBelong(c, {"--budget=1"}).ok());
  EXPECT_FALSE(ApplyConfig(c, {{"budget", "1"}}, "c.json").ok());
  char prog[] = "skipswarm", cmd[] = "test", flag[] = "--budget=1";
  char* argv[] = {prog, cmd, flag};
  EXPECT_EQ(RunCli(3, argv, {c}), 2);
  // An alias that agrees with the prefix is fine.
  c.flag_aliases = {{"budget", "runner_test_budget"}};
  EXPECT_EQ(ResolveFlagAlias(c, "budget").value(), "runner_test_budget");
}

TEST(RunnerTest, ShortNamesWorkOnTheCommandLineInConfigAndInHelp) {
  Command c = PrefixedCommand();
  c.run = [](const std::vector<std::string>&) { return 0; };
  absl::SetFlag(&FLAGS_budget, 3);
  absl::SetFlag(&FLAGS_runner_test_fast, true);
  char prog[] = "skipswarm", cmd[] = "test", flag[] = "--budget=31", neg[] = "--nofast";
  char* argv[] = {prog, cmd, flag, neg};
  EXPECT_EQ(RunCli(4, argv, {c, BudgetOwner()}), 0);
  EXPECT_EQ(absl::GetFlag(FLAGS_runner_test_budget), 31);
  EXPECT_FALSE(absl::GetFlag(FLAGS_runner_test_fast));
  EXPECT_EQ(absl::GetFlag(FLAGS_budget), 3);  // the other command's flag is untouched

  char old[] = "--runner_test_budget=32";
  char* argv2[] = {prog, cmd, old};
  EXPECT_EQ(RunCli(3, argv2, {c}), 0);
  EXPECT_EQ(absl::GetFlag(FLAGS_runner_test_budget), 32);

  ASSERT_TRUE(ApplyConfig(c, {{"budget", "33"}, {"fast", "true"}}, "c.json").ok());
  EXPECT_EQ(absl::GetFlag(FLAGS_runner_test_budget), 33);
  EXPECT_TRUE(absl::GetFlag(FLAGS_runner_test_fast));
  ASSERT_TRUE(ApplyConfig(c, {{"runner_test_budget", "34"}}, "c.json").ok());
  EXPECT_EQ(absl::GetFlag(FLAGS_runner_test_budget), 34);
  EXPECT_EQ(absl::GetFlag(FLAGS_budget), 3);

  const std::string help = CommandHelp(c);
  EXPECT_NE(help.find("  --budget (default: \"10\")\n"), std::string::npos) << help;
  EXPECT_NE(help.find("(old name, deprecated: --runner_test_budget)"), std::string::npos)
      << help;
  EXPECT_EQ(help.find("  --runner_test_budget (default"), std::string::npos) << help;
  EXPECT_NE(help.find("  --runner_test_fast_budget (default"), std::string::npos) << help;
}

TEST(RunnerTest, HelpGroupsFlagsAndHidesExperimentOnesUntilHelpfull) {
  Command c = TestCommand();
  c.help_groups = {{"speed", {"runner_test_fast"}}, {"experiment", {"runner_test_budget"}, {}, true}};
  const std::string help = CommandHelp(c);
  EXPECT_NE(help.find("\nspeed flags:\n  --runner_test_fast"), std::string::npos) << help;
  EXPECT_EQ(help.find("--runner_test_budget"), std::string::npos) << help;
  EXPECT_NE(help.find("1 experiment flags are not shown; `skipswarm test --helpfull`"),
            std::string::npos)
      << help;
  const std::string full = CommandHelp(c, /*full=*/true);
  EXPECT_NE(full.find("\nexperiment flags:\n  --runner_test_budget"), std::string::npos) << full;
  // Hidden flags still work.
  EXPECT_TRUE(CheckFlagsBelong(c, {"--runner_test_budget=3"}).ok());
}

TEST(RunnerTest, DashDashVersionRunsTheVersionCommand) {
  int ran = 0;
  Command version{"version", "v", "skipswarm version", {}, [&](const std::vector<std::string>&) {
                    ++ran;
                    return 0;
                  }};
  char prog[] = "skipswarm", flag[] = "--version";
  char* argv[] = {prog, flag};
  EXPECT_EQ(RunCli(2, argv, {TestCommand(), version}), 0);
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(RunCli(2, argv, {TestCommand()}), 2);  // no version command: unknown
}

}  // namespace
}  // namespace skipswarm::common::cli
