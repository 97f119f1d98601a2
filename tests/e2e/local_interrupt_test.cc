// Note [Stopping] with the real binary: a terminal's Ctrl-C sends SIGINT to
// the whole foreground process group of `skipswarm local`. Every node must
// stop after its iteration with its checkpoint and the launcher exit 0.
// Before, the nodes were in the launcher's group: the terminal's SIGINT and
// then the launcher's forwarded one reached each node as two signals, the
// second meaning "exit at once", so every node exited without a checkpoint
// and the run failed.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/real_clock.h"
#include "gtest/gtest.h"
#include "tests/e2e/tiny_model.h"
#include "tests/harness/skipswarm_process.h"

namespace skipswarm::tests {
namespace {

TEST(LocalInterruptTest, CtrlCToTheProcessGroupStopsEveryNodeWithACheckpoint) {
  const std::string dir = *MakeTestDir("local_interrupt");
  const std::string run = dir + "/run";
  std::vector<std::string> args = {SkipswarmBinary()};
  for (const std::string& a : TinyModelArgs("local")) args.push_back(a);
  args.push_back("--local_dir=" + run);
  args.push_back("--local_iterations=100000");  // stopped by the test
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string out_path = dir + "/stdout", err_path = dir + "/stderr";

  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // A job of its own, as a shell starts one: the group a terminal's
    // Ctrl-C goes to.
    setpgid(0, 0);
    const int o = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0 || chdir(dir.c_str()) != 0) {
      _exit(126);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  setpgid(pid, pid);  // either side may run first

  // Wait for a few trained iterations (bounded: a swarm that never trains
  // fails the test instead of hanging it).
  auto clock = common::RealClock::Create();
  const absl::Duration deadline = clock->SteadyNow() + absl::Seconds(240);
  bool trained = false;
  while (!trained && clock->SteadyNow() < deadline) {
    absl::StatusOr<std::string> progress = ReadFile(run + "/progress.jsonl");
    trained = progress.ok() && absl::StrContains(*progress, "\"iteration\":3,");
    if (!trained) clock->SleepFor(absl::Milliseconds(100));
  }
  if (!trained) kill(-pid, SIGKILL);
  ASSERT_TRUE(trained) << "the swarm did not train 4 iterations in 240 s";

  ASSERT_EQ(kill(-pid, SIGINT), 0);  // the terminal's Ctrl-C
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) ASSERT_EQ(errno, EINTR);
  const std::string out = ReadFile(out_path).value_or("");
  const std::string err = ReadFile(err_path).value_or("");
  ASSERT_TRUE(WIFEXITED(status)) << out << err;
  EXPECT_EQ(WEXITSTATUS(status), 0) << out << err;
  EXPECT_TRUE(absl::StrContains(out, "interrupted: asking every node")) << out;
  EXPECT_FALSE(absl::StrContains(out, "failed (see")) << out;
  // Every node's stage file: 2 data nodes on stage 0, 2 replicas of stages
  // 1 and 2.
  int files = 0;
  std::error_code ec;
  for (const auto& f : std::filesystem::directory_iterator(run + "/checkpoints", ec)) {
    if (f.path().extension() == ".ckpt") ++files;
  }
  EXPECT_EQ(files, 6) << out << err;
}

}  // namespace
}  // namespace skipswarm::tests
