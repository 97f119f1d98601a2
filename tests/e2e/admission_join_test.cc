// Note [Admission] with the real binary (processes on loopback): the
// founder's manifest says --admission=invite; `skipswarm invite` mints a
// token bound to one joiner's key and an unbound one for another; both
// joiners train with the founder, while a node without an invite and one
// holding another node's invite stop before anything is built, naming the
// cause.
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/free_port.h"
#include "gtest/gtest.h"
#include "tests/e2e/tiny_model.h"
#include "tests/harness/skipswarm_process.h"

namespace skipswarm::tests {
namespace {

// `skipswarm keygen` in `dir`; returns the node id it prints.
std::string Keygen(const std::string& dir, const std::string& name) {
  absl::StatusOr<ProcessResult> r = RunSkipswarm({"keygen", "--key_file=" + name + ".key"}, dir);
  EXPECT_TRUE(r.ok() && r->exit_code == 0) << (r.ok() ? r->err : r.status().ToString());
  if (!r.ok()) return "";
  const size_t at = r->out.find("node id ");
  EXPECT_NE(at, std::string::npos) << r->out;
  return at == std::string::npos ? "" : r->out.substr(at + 8, 64);
}

// `skipswarm invite` with the founder's key; returns the token.
std::string Invite(const std::string& dir, const std::string& node_id) {
  std::vector<std::string> args = {"invite", "--node_key_file=f0.key", "--swarm_name=adm",
                                   "--expires=1h"};
  if (!node_id.empty()) args.push_back("--node_id=" + node_id);
  absl::StatusOr<ProcessResult> r = RunSkipswarm(args, dir);
  EXPECT_TRUE(r.ok() && r->exit_code == 0) << (r.ok() ? r->err : r.status().ToString());
  return r.ok() ? std::string(absl::StripAsciiWhitespace(r->out)) : "";
}

TEST(AdmissionJoinTest, InvitedNodesTrainAndStrangersStopNamingTheCause) {
  absl::StatusOr<int> port = common::FreeLoopbackPort();
  ASSERT_TRUE(port.ok()) << port.status();
  const std::string address = absl::StrCat("127.0.0.1:", *port);
  const std::string dir = *MakeTestDir("admission_join");
  Keygen(dir, "f0");
  const std::string a_id = Keygen(dir, "a");
  Keygen(dir, "b");
  Keygen(dir, "c");
  Keygen(dir, "d");
  const std::string a_token = Invite(dir, a_id);
  ASSERT_TRUE(absl::StartsWith(a_token, "ssinv1.")) << a_token;
  ASSERT_TRUE(WriteFile(dir + "/b.invite", Invite(dir, "") + "\n").ok());

  std::vector<std::string> founder = TinyModelArgs("node");
  for (const char* a : {"--name=f0", "--host_stages=0", "--expect_members=3", "--insecure",
                        "--node_key_file=f0.key", "--swarm_name=adm", "--admission=invite",
                        "--node_iterations=20"}) {
    founder.push_back(a);
  }
  founder.push_back("--listen=" + address);
  auto joiner = [&](const std::string& name, const std::string& stage,
                    const std::string& invite) {
    std::vector<std::string> args = {"node", "--name=" + name, "--host_stages=" + stage,
                                     "--expect_members=3", "--insecure", "--threads=1",
                                     "--node_key_file=" + name + ".key", "--swarm_name=adm",
                                     "--startup_timeout_s=60", "--join=" + address};
    if (!invite.empty()) args.push_back("--invite=" + invite);
    return args;
  };
  std::vector<std::vector<std::string>> args = {
      founder, joiner("a", "1", a_token), joiner("b", "2", "b.invite"),
      joiner("c", "1", ""), joiner("d", "2", a_token)};
  std::vector<ProcessResult> results(args.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < args.size(); ++i) {
    threads.emplace_back([&, i] {
      absl::StatusOr<ProcessResult> r = RunSkipswarm(args[i], dir);
      if (r.ok()) results[i] = *r;
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < 3; ++i) ASSERT_EQ(results[i].exit_code, 0) << results[i].err;
  EXPECT_TRUE(absl::StrContains(results[0].err, "admission invite")) << results[0].err;
  EXPECT_TRUE(absl::StrContains(results[1].out + results[1].err, "[a] it 19")) << results[1].err;
  EXPECT_TRUE(absl::StrContains(results[2].out + results[2].err, "[b] it 19")) << results[2].err;
  // The strangers: refused at their own check of the manifest's policy.
  EXPECT_NE(results[3].exit_code, 0);
  EXPECT_TRUE(absl::StrContains(results[3].err, "[admission] this swarm (admission: invite) "
                                                "would refuse this node"))
      << results[3].err;
  EXPECT_TRUE(absl::StrContains(results[3].err, "has no invite")) << results[3].err;
  EXPECT_NE(results[4].exit_code, 0);
  EXPECT_TRUE(absl::StrContains(results[4].err, "invite is for another node (" + a_id.substr(0, 8)))
      << results[4].err;
  for (int i = 3; i < 5; ++i) {
    EXPECT_FALSE(absl::StrContains(results[i].err, "joined the swarm")) << results[i].err;
  }
}

}  // namespace
}  // namespace skipswarm::tests
