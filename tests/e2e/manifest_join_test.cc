// Only the founder is told the model: two nodes that join with --join and
// their stage take it from the swarm manifest, and the three train
// together (real processes on loopback). The founder's --sign_frames is
// the swarm's too (Note [Checkable evidence], "Signed swarms"): the joiners
// sign without the flag, or membership would refuse their records.
#include <unistd.h>

#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/free_port.h"
#include "gtest/gtest.h"
#include "tests/e2e/tiny_model.h"
#include "tests/harness/skipswarm_process.h"

namespace skipswarm::tests {
namespace {

TEST(ManifestJoinTest, JoinersWithoutModelFlagsTrainTheFoundersModel) {
  // The founder's --listen (the joiners retry a refused connection while it
  // starts).
  absl::StatusOr<int> port_or = common::FreeLoopbackPort();
  ASSERT_TRUE(port_or.ok()) << port_or.status();
  const int port = *port_or;
  const std::string address = absl::StrCat("127.0.0.1:", port);
  const std::string dir = *MakeTestDir("manifest_join");
  std::vector<std::string> founder = TinyModelArgs("node");
  for (const char* a : {"--name=f0", "--host_stages=0", "--expect_members=3", "--insecure",
                        "--node_iterations=6", "--write_swarm_file=swarm.json",
                        "--sign_frames"}) {
    founder.push_back(a);
  }
  founder.push_back("--listen=" + address);
  auto joiner = [&](const std::string& name, const std::string& stage) {
    return std::vector<std::string>{"node", "--name=" + name, "--host_stages=" + stage,
                                    "--expect_members=3", "--insecure", "--threads=1",
                                    "--startup_timeout_s=60", "--join=" + address};
  };
  ProcessResult results[3];
  std::vector<std::vector<std::string>> args = {founder, joiner("a", "1"), joiner("b", "2")};
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      auto r = RunSkipswarm(args[i], dir);
      if (r.ok()) results[i] = *r;
    });
  }
  for (std::thread& t : threads) t.join();
  for (const ProcessResult& r : results) ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string swarm_file = *ReadFile(dir + "/swarm.json");
  // The joiners fetched the manifest the founder published, and its model.
  for (int i = 1; i < 3; ++i) {
    const std::string& err = results[i].err;
    EXPECT_TRUE(absl::StrContains(err, "from founder")) << err;
    EXPECT_TRUE(absl::StrContains(err, "model custom (3 layers, d_model 64, 4 heads, ffn 128"))
        << err;
    EXPECT_TRUE(absl::StrContains(err, ", signed frames)")) << err;
    // "swarm manifest <64 hex> from founder <id>"
    const size_t at = err.find(" from founder ");
    ASSERT_NE(at, std::string::npos);
    ASSERT_GE(at, 64u);
    const std::string hash = err.substr(at - 64, 64);
    EXPECT_TRUE(absl::StrContains(swarm_file, hash)) << swarm_file;
  }
  // They trained: every node logged its last iteration.
  EXPECT_TRUE(absl::StrContains(results[0].out + results[0].err, "[f0] it 5")) << results[0].err;
  EXPECT_TRUE(absl::StrContains(results[1].out + results[1].err, "[a] it 5")) << results[1].err;
}

}  // namespace
}  // namespace skipswarm::tests
