#include "manifest/join_target.h"

#include <cstdlib>
#include <fstream>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "manifest/swarm_file.h"

namespace skipswarm::manifest {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

std::string ErrorOf(absl::string_view address) {
  return std::string(CheckJoinAddress(address).message());
}

TEST(JoinTargetTest, GoodAddressesPass) {
  EXPECT_TRUE(CheckJoinAddress("127.0.0.1:7000").ok());
  EXPECT_TRUE(CheckJoinAddress("seed.example.org:7000").ok());
  EXPECT_TRUE(CheckJoinAddress("[::1]:7000").ok());
  EXPECT_EQ(SplitHostPort("[::1]:7000"), std::make_pair(std::string("::1"), std::string("7000")));
}

TEST(JoinTargetTest, AMissingPortIsNamedWithAnExample) {
  const std::string e = ErrorOf("seed.example.org");
  EXPECT_TRUE(absl::StrContains(e, "[address] no port")) << e;
  EXPECT_TRUE(absl::StrContains(e, "--join=seed.example.org:7000")) << e;
}

TEST(JoinTargetTest, AUrlIsNamedAndItsHostPortSuggested) {
  const std::string e = ErrorOf("http://10.0.0.5:9464/metrics");
  EXPECT_TRUE(absl::StrContains(e, "[address] a URL, not a node address")) << e;
  EXPECT_TRUE(absl::StrContains(e, "--join=10.0.0.5:9464")) << e;
}

TEST(JoinTargetTest, BadPortsAndBareIpv6AreExplained) {
  EXPECT_TRUE(absl::StrContains(ErrorOf("host:http"), "is not a number"));
  EXPECT_TRUE(absl::StrContains(ErrorOf("host:70000"), "outside 1..65535"));
  EXPECT_TRUE(absl::StrContains(ErrorOf("::1:7000"), "needs brackets"));
  EXPECT_TRUE(absl::StrContains(ErrorOf(":7000"), "no host"));
}

TEST(JoinTargetTest, SeveralAddressesAndASwarmFileCombine) {
  SwarmFile f;
  f.manifest_sha256 = std::string(64, 'b');
  f.bootstrap = {"10.0.0.1:7000", "10.0.0.2:7000"};
  const std::string path = TempPath("swarm.json");
  ASSERT_TRUE(WriteSwarmFile(path, f).ok());
  auto t = ParseJoinFlag(path + ",10.0.0.3:7000,10.0.0.1:7000");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->addresses,
            (std::vector<std::string>{"10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"}));
  EXPECT_EQ(t->pinned_sha256, f.manifest_sha256);
}

TEST(JoinTargetTest, SwarmFileRoundTrips) {
  SwarmFile f;
  f.manifest_sha256 = std::string(64, 'c');
  f.founder_id = "abcd";
  f.swarm_name = "s";
  f.bootstrap = {"[::1]:7000"};
  auto back = ParseSwarmFile(SwarmFileToJson(f));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->manifest_sha256, f.manifest_sha256);
  EXPECT_EQ(back->bootstrap, f.bootstrap);
  EXPECT_EQ(back->swarm_name, "s");
}

TEST(JoinTargetTest, HostileSwarmFilesAreRefusedWithAReason) {
  const std::string hash = std::string(64, 'a');
  struct Case {
    std::string text, expect;
  } cases[] = {
      {"", "not a JSON object"},
      {"{\"manifest_sha256\": ", "not a JSON object"},
      {"[1,2,3]", "not a JSON object"},
      {"{\"manifest_sha256\": 5, \"bootstrap\": [\"a:1\"]}", "is not a string"},
      {"{\"manifest_sha256\": \"xyz\", \"bootstrap\": [\"a:1\"]}", "64 hex digits"},
      {"{\"manifest_sha256\": \"" + hash + "\"}", "non-empty list"},
      {"{\"manifest_sha256\": \"" + hash + "\", \"bootstrap\": [7]}", "not a string"},
      {"{\"manifest_sha256\": \"" + hash + "\", \"bootstrap\": [\"http://a:1\"]}", "a URL"},
      {"{\"format\": 9, \"manifest_sha256\": \"" + hash + "\", \"bootstrap\": [\"a:1\"]}",
       "format"},
      {std::string(kMaxSwarmFileBytes + 1, ' '), "at most"},
      // Deep nesting: the parser must not recurse itself to death.
      {std::string(20000, '[') , "not a JSON object"},
  };
  for (const Case& c : cases) {
    auto f = ParseSwarmFile(c.text);
    EXPECT_FALSE(f.ok()) << c.text.substr(0, 80);
    EXPECT_TRUE(absl::StrContains(f.status().message(), c.expect))
        << c.text.substr(0, 80) << " -> " << f.status();
  }
  std::string many = "{\"manifest_sha256\": \"" + hash + "\", \"bootstrap\": [";
  for (int i = 0; i < 100; ++i) many += std::string(i ? "," : "") + "\"a:1\"";
  many += "]}";
  EXPECT_TRUE(absl::StrContains(ParseSwarmFile(many).status().message(), "at most 64"));
}

TEST(JoinTargetTest, AMissingOrBrokenSwarmFileIsNamedInTheJoinError) {
  auto t = ParseJoinFlag(TempPath("nope.json"));
  EXPECT_FALSE(t.ok());
  EXPECT_TRUE(absl::StrContains(t.status().message(), "[swarm-file] cannot read")) << t.status();
  const std::string bad = TempPath("bad.json");
  std::ofstream(bad) << "not json";
  t = ParseJoinFlag(bad);
  EXPECT_TRUE(absl::StrContains(t.status().message(), "[swarm-file] the swarm file is not"))
      << t.status();
}

}  // namespace
}  // namespace skipswarm::manifest
