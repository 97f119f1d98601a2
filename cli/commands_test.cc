#include "cli/commands.h"

#include "absl/container/flat_hash_set.h"
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

}  // namespace
}  // namespace skipswarm::cli
