#include "launcher/local_processes.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace skipswarm::launcher {
namespace {

std::string FreshDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(base ? base : "/tmp", "/", name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/logs");
  return dir;
}

// wait4's status of a child that ran `body`.
template <typename F>
int StatusOf(F body) {
  const pid_t pid = fork();
  if (pid == 0) body();
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

TEST(DescribeEndTest, TellsAnExitCodeFromASignal) {
  EXPECT_EQ(DescribeEnd(StatusOf([] { _exit(1); })), "exited with code 1");
  EXPECT_EQ(DescribeEnd(StatusOf([] { _exit(0); })), "exited with code 0");
  EXPECT_EQ(DescribeEnd(StatusOf([] {
              signal(SIGTERM, SIG_DFL);
              raise(SIGTERM);
              _exit(0);
            })),
            "killed by signal 15 (SIGTERM)");
  EXPECT_EQ(DescribeEnd(StatusOf([] {
              raise(SIGKILL);
              _exit(0);
            })),
            "killed by signal 9 (SIGKILL)");
}

TEST(LogTailTest, KeepsTheLastLinesIndented) {
  const std::string dir = FreshDir("log_tail");
  {
    std::ofstream f(dir + "/a.log");
    for (int i = 0; i < 100; ++i) f << "line " << i << "\n";
    f << "\n";
  }
  EXPECT_EQ(LogTail(dir + "/a.log", 3), "  line 97\n  line 98\n  line 99\n");
  // Read from the end only: a cut first line is left out.
  EXPECT_EQ(LogTail(dir + "/a.log", 100, 20), "  line 98\n  line 99\n");
  EXPECT_EQ(LogTail(dir + "/missing.log", 3), "");
}

TEST(DescribeNodeEndTest, NamesHowTheNodeEndedAndItsLogsLastLines) {
  const std::string dir = FreshDir("node_end");
  {
    std::ofstream f(dir + "/logs/s2r0.err");
    f << "I starting\nE s2r0: the swarm did not form: 5 of 6 members ready\n";
  }
  LocalChild c{"s2r0"};
  c.status = StatusOf([] { _exit(1); });
  const std::string text = DescribeNodeEnd(dir, c);
  EXPECT_TRUE(absl::StartsWith(text, "node s2r0 exited with code 1; the last lines of ")) << text;
  EXPECT_TRUE(absl::StrContains(text, "  E s2r0: the swarm did not form")) << text;
  LocalChild quiet{"s2r1"};
  quiet.status = StatusOf([] {
    raise(SIGKILL);
    _exit(0);
  });
  EXPECT_TRUE(absl::StrContains(DescribeNodeEnd(dir, quiet),
                                "node s2r1 killed by signal 9 (SIGKILL); "))
      << DescribeNodeEnd(dir, quiet);
}

}  // namespace
}  // namespace skipswarm::launcher
