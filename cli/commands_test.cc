#include "cli/commands.h"

#include "absl/container/flat_hash_set.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_join.h"
#include "common/cli/runner.h"
#include "gtest/gtest.h"

namespace skipswarm::cli {
namespace {

TEST(CommandsTest, NamesAreUniqueAndEveryCommandHasHelp) {
  absl::flat_hash_set<std::string> names;
  for (const common::cli::Command& c : AllCommands()) {
    EXPECT_TRUE(names.insert(c.name).second) << "duplicate command " << c.name;
    EXPECT_FALSE(c.summary.empty()) << c.name;
    EXPECT_FALSE(c.usage.empty()) << c.name;
    EXPECT_TRUE(c.run) << c.name;
    EXPECT_NE(common::cli::CommandHelp(c).find("usage: "), std::string::npos);
  }
}

TEST(CommandsTest, OnlyTheCommandsThatRunTheModelSetUpBlas) {
  // Note [BLAS core]: these re-execute for the fast kernels; every other
  // command (help and version included) starts without the probe.
  const absl::flat_hash_set<std::string> compute = {"train-ref", "eval", "export", "node",
                                                   "local"};
  for (const common::cli::Command& c : AllCommands()) {
    EXPECT_EQ(c.uses_blas, compute.contains(c.name)) << c.name;
  }
  const std::vector<common::cli::Command> commands = AllCommands();
  std::string word = "version";
  char* version[] = {const_cast<char*>("skipswarm"), word.data(), nullptr};
  ASSERT_NE(common::cli::CommandToRun(2, version, commands), nullptr);
  EXPECT_EQ(common::cli::CommandToRun(2, version, commands)->name, "version");
  EXPECT_EQ(common::cli::CommandToRun(1, version, commands), nullptr);
  word = "--help";
  EXPECT_EQ(common::cli::CommandToRun(2, version, commands), nullptr);
}

TEST(CommandsTest, EveryFlagFileOwnsAtLeastOneFlag) {
  // A typo in a command's flag_files would silently hide its flags.
  for (const common::cli::Command& c : AllCommands()) {
    for (const std::string& file : c.flag_files) {
      common::cli::Command only_file{c.name, "", "", {file}, nullptr};
      std::string help = common::cli::CommandHelp(only_file);
      size_t own = help.find("flags:\n");
      size_t common_part = help.find("common flags:");
      EXPECT_NE(help.substr(own, common_part - own).find("--"), std::string::npos)
          << c.name << " lists " << file << " but no flag is defined there";
    }
  }
}

const common::cli::Command& Find(const std::vector<common::cli::Command>& all,
                                  const std::string& name) {
  for (const common::cli::Command& c : all) {
    if (c.name == name) return c;
  }
  ADD_FAILURE() << "no command " << name;
  return all.front();
}

std::string Resolve(const common::cli::Command& c, const std::string& name) {
  absl::StatusOr<std::string> r = common::cli::ResolveFlagAlias(c, name);
  return r.ok() ? *r : std::string(r.status().message());
}

std::string Value(const std::string& flag) {
  return absl::FindCommandLineFlag(flag)->CurrentValue();
}

// Note [Short flag names]: the command names the flags; the prefixes that
// Abseil's global names forced are optional.
TEST(CommandsTest, CommandsTakeTheirFlagsWithoutTheCommandsPrefix) {
  const std::vector<common::cli::Command> all = AllCommands();
  const common::cli::Command& local = Find(all, "local");
  EXPECT_EQ(Resolve(local, "iterations"), "local_iterations");  // not train-ref's
  EXPECT_EQ(Resolve(local, "replicas"), "local_replicas");
  EXPECT_EQ(Resolve(local, "data_nodes"), "local_data_nodes");
  EXPECT_EQ(Resolve(local, "memory_slots"), "local_memory_slots");  // not node's
  EXPECT_EQ(Resolve(local, "local_iterations"), "local_iterations");  // the old name
  EXPECT_EQ(Resolve(local, "seed"), "seed");  // the model's seed is local's own flag
  const common::cli::Command& node = Find(all, "node");
  EXPECT_EQ(Resolve(node, "iterations"), "node_iterations");
  EXPECT_EQ(Resolve(node, "key_file"), "node_key_file");  // not keygen's
  EXPECT_EQ(Resolve(node, "mbs"), "node_mbs");
  EXPECT_EQ(Resolve(node, "node_iterations"), "node_iterations");
  EXPECT_EQ(Resolve(node, "memory_slots"), "memory_slots");
  const common::cli::Command& sim = Find(all, "sim");
  EXPECT_EQ(Resolve(sim, "scenario"), "sim_scenario");
  EXPECT_EQ(Resolve(sim, "report"), "sim_report");
  EXPECT_EQ(Resolve(Find(all, "export"), "out"), "export_out");
  EXPECT_EQ(Resolve(Find(all, "invite"), "key_file"), "node_key_file");
  EXPECT_EQ(Resolve(Find(all, "revoke"), "key_file"), "node_key_file");

  EXPECT_TRUE(common::cli::CheckFlagsBelong(
                  local, {"--iterations=200", "--replicas=2", "--data_nodes=2", "--nomixed"})
                  .ok());
  EXPECT_TRUE(common::cli::CheckFlagsBelong(node, {"--iterations=5", "--key_file=k"}).ok());
  absl::Status typo = common::cli::CheckFlagsBelong(local, {"--iteratons=200"});
  EXPECT_NE(typo.message().find("unknown flag --iteratons for 'skipswarm local'"),
            std::string::npos)
      << typo;
  // Other commands' flags stay refused: --scenario is plan's, and local has
  // no --local_scenario.
  EXPECT_FALSE(common::cli::CheckFlagsBelong(local, {"--scenario=x"}).ok());
}

TEST(CommandsTest, ConfigKeysTakeShortAndOldNames) {
  const std::vector<common::cli::Command> all = AllCommands();
  const common::cli::Command& node = Find(all, "node");
  ASSERT_TRUE(common::cli::ApplyConfig(node, {{"iterations", "7"}, {"key_file", "a.key"}},
                                       "node.json")
                  .ok());
  EXPECT_EQ(Value("node_iterations"), "7");
  EXPECT_EQ(Value("node_key_file"), "a.key");
  EXPECT_EQ(Value("iterations"), "2000");  // train-ref's, untouched
  ASSERT_TRUE(common::cli::ApplyConfig(node, {{"node_iterations", "8"}}, "node.json").ok());
  EXPECT_EQ(Value("node_iterations"), "8");
}

TEST(CommandsTest, HelpShowsShortNamesAndTheOldOnesAsDeprecated) {
  const std::vector<common::cli::Command> all = AllCommands();
  const std::string help = common::cli::CommandHelp(Find(all, "local"), /*full=*/true);
  EXPECT_NE(help.find("\n  --iterations (default: \"200\")"), std::string::npos) << help;
  EXPECT_NE(help.find("(old name, deprecated: --local_iterations)"), std::string::npos);
  EXPECT_EQ(help.find("\n  --local_iterations"), std::string::npos);
  EXPECT_EQ(help.find("usage: skipswarm local [--data_nodes=2 --replicas=2 --iterations=200]"),
            0u)
      << help;
  const std::string node = common::cli::CommandHelp(Find(all, "node"));
  EXPECT_NE(node.find("\n  --key_file (default"), std::string::npos) << node;
}

// The rule when a short name is also one of the command's own flags: the
// own flag wins and the prefixed one keeps its full name only. Every such
// case is listed here, so that a new one is a decision, not an accident;
// and no short name is ambiguous.
TEST(CommandsTest, ShortNamesThatAreAlsoOwnFlagsAreKnownAndNoneIsAmbiguous) {
  std::vector<std::string> shadowed;
  for (const common::cli::Command& c : AllCommands()) {
    if (c.flag_prefix.empty()) continue;
    for (const auto& [name, flag] : absl::GetAllFlags()) {
      const std::string n(name);
      if (flag->IsRetired() || n.rfind(c.flag_prefix, 0) != 0) continue;
      if (!common::cli::FlagBelongsTo(c, n)) continue;
      const std::string short_name = n.substr(c.flag_prefix.size());
      absl::StatusOr<std::string> r = common::cli::ResolveFlagAlias(c, short_name);
      ASSERT_TRUE(r.ok()) << c.name << ": " << r.status();
      if (*r != n) shadowed.push_back(c.name + " --" + short_name);
    }
  }
  std::sort(shadowed.begin(), shadowed.end());
  EXPECT_EQ(shadowed, std::vector<std::string>{}) << absl::StrJoin(shadowed, ", ");
}

}  // namespace
}  // namespace skipswarm::cli
