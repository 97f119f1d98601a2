#include "cli/swarm_secret.h"

#include <sys/stat.h>

#include <fstream>

#include "gtest/gtest.h"

namespace skipswarm::cli {
namespace {

std::string WriteFile(const std::string& name, const std::string& text, mode_t mode) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  chmod(path.c_str(), mode);
  return path;
}

TEST(SwarmSecretTest, NoneGivenIsAnOpenSwarm) {
  std::string warning = "stale";
  absl::StatusOr<std::string> s = ResolveSwarmSecret({}, &warning);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, "");
  EXPECT_EQ(warning, "");
}

TEST(SwarmSecretTest, FileIsTrimmedAndQuiet) {
  std::string warning;
  absl::StatusOr<std::string> s =
      ResolveSwarmSecret({"", WriteFile("secret", "  hunter2\n", 0600), std::nullopt}, &warning);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, "hunter2");
  EXPECT_EQ(warning, "");
}

TEST(SwarmSecretTest, FileOthersCanReadWarns) {
  std::string warning;
  absl::StatusOr<std::string> s =
      ResolveSwarmSecret({"", WriteFile("open_secret", "x\n", 0644), std::nullopt}, &warning);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_NE(warning.find("chmod 600"), std::string::npos) << warning;
}

TEST(SwarmSecretTest, EnvironmentIsQuiet) {
  std::string warning;
  absl::StatusOr<std::string> s = ResolveSwarmSecret({"", "", "from-env"}, &warning);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, "from-env");
  EXPECT_EQ(warning, "");
}

TEST(SwarmSecretTest, CommandLineWorksButWarnsNamingTheAlternatives) {
  std::string warning;
  absl::StatusOr<std::string> s = ResolveSwarmSecret({"argv-secret", "", std::nullopt}, &warning);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, "argv-secret");
  EXPECT_NE(warning.find("--swarm_secret_file"), std::string::npos) << warning;
  EXPECT_NE(warning.find(kSwarmSecretEnv), std::string::npos) << warning;
  EXPECT_EQ(warning.find("argv-secret"), std::string::npos) << "the warning repeats the secret";
}

TEST(SwarmSecretTest, BadSourcesAreRefusedClearly) {
  const std::string ok_file = WriteFile("ok", "x", 0600);
  for (const SwarmSecretSources& bad : std::vector<SwarmSecretSources>{
           {"a", ok_file, std::nullopt},
           {"a", "", "b"},
           {"", ok_file, "b"},
           {"", ::testing::TempDir() + "/missing", std::nullopt},
           {"", WriteFile("empty", " \n", 0600), std::nullopt},
           {"", WriteFile("huge", std::string(kMaxSwarmSecretFileBytes + 1, 'x'), 0600),
            std::nullopt},
       }) {
    absl::StatusOr<std::string> s = ResolveSwarmSecret(bad, nullptr);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << s.status();
  }
}

}  // namespace
}  // namespace skipswarm::cli
