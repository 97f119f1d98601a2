#include "common/stamp/git_commit.h"

#include <regex>
#include <string>

#include "gtest/gtest.h"

namespace skipswarm::common {
namespace {

TEST(GitCommitTest, IsAShortHashOrUnknown) {
  const std::string commit = GitCommit();
  // Unstamped builds (the default) say "unknown"; --stamp builds a hash.
  EXPECT_TRUE(std::regex_match(commit, std::regex("unknown|[0-9a-f]{4,40}(-dirty)?"))) << commit;
}

}  // namespace
}  // namespace skipswarm::common
