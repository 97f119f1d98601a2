#include "launcher/local_config.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace skipswarm::launcher {
namespace {

std::string FreshDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(base ? base : "/tmp", "/", name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

nlohmann::json ReadConfig(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

const LocalLayout kLayout = {{"d0", {0}}, {"s1r0", {1}}, {"s2r0", {2}}};

LocalConfigOptions GossipOptions(const std::string& dir, const std::string& swarm_name) {
  LocalConfigOptions o;
  o.dir = dir;
  o.iterations = 10;
  o.gossip = true;
  o.founder = "d0";
  o.expect_members = kLayout.size();
  o.swarm_name = swarm_name;
  o.model_settings = {"\"stages\": \"3\""};  // the launcher always passes some
  return o;
}

// Note [One swarm per run]: every node of a run, founders and joiners,
// names the run's swarm, so two runs on one machine never admit each other.
TEST(LocalConfigsTest, EveryNodeOfARunNamesTheRunsOwnSwarm) {
  const std::string dir = FreshDir("one_swarm");
  LocalConfigOptions o = GossipOptions(dir, "local-00000000000000aa");
  ASSERT_TRUE(AssignLocalAddresses(kLayout, &o).ok());
  const LocalConfigs configs(std::move(o));
  for (const auto& [name, stages] : kLayout) {
    const nlohmann::json j = ReadConfig(configs.Write(name, stages));
    EXPECT_EQ(j.value("swarm_name", ""), "local-00000000000000aa") << name;
  }
  const nlohmann::json joiner = ReadConfig(configs.Write("j0", {}));
  EXPECT_EQ(joiner.value("swarm_name", ""), "local-00000000000000aa");
}

TEST(LocalConfigsTest, WithoutARunNameTheNodesKeepTheirDefault) {
  const std::string dir = FreshDir("default_swarm");
  LocalConfigOptions o = GossipOptions(dir, "");
  ASSERT_TRUE(AssignLocalAddresses(kLayout, &o).ok());
  const LocalConfigs configs(std::move(o));
  EXPECT_FALSE(ReadConfig(configs.Write("s1r0", {1})).contains("swarm_name"));
}

TEST(LocalSwarmNameTest, DiffersWithItsRandomBits) {
  EXPECT_EQ(LocalSwarmName(0xaa), "local-00000000000000aa");
  EXPECT_NE(LocalSwarmName(1), LocalSwarmName(2));
}

}  // namespace
}  // namespace skipswarm::launcher
