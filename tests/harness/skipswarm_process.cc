#include "tests/harness/skipswarm_process.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "launcher/local_processes.h"

namespace skipswarm::tests {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// The runfiles root of this workspace. Bazel starts a test there, so the
// working folder at the first call is the fallback when TEST_SRCDIR is unset.
std::string RunfilesRoot() {
  const std::string srcdir = Env("TEST_SRCDIR");
  const std::string workspace = Env("TEST_WORKSPACE");
  if (!srcdir.empty() && !workspace.empty()) return srcdir + "/" + workspace;
  return std::filesystem::current_path().string();
}

std::string TempRoot() {
  const std::string t = Env("TEST_TMPDIR");
  return t.empty() ? std::filesystem::temp_directory_path().string() : t;
}

}  // namespace

std::string SkipswarmBinary() {
  const std::string rel = Env("SKIPSWARM_BINARY");
  return rel.empty() ? "" : RunfilePath(rel);
}

std::string RunfilePath(absl::string_view workspace_relative) {
  return absl::StrCat(RunfilesRoot(), "/", workspace_relative);
}

absl::StatusOr<std::string> MakeTestDir(absl::string_view name) {
  const std::string dir = absl::StrCat(TempRoot(), "/", name);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  return dir;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

absl::Status WriteFile(const std::string& path, absl::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

std::string NodeLogTails(const std::string& logs_dir, int max_lines) {
  std::vector<std::string> logs;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(logs_dir, ec)) {
    if (e.path().extension() == ".err") logs.push_back(e.path().string());
  }
  std::sort(logs.begin(), logs.end());
  if (logs.empty()) return absl::StrCat("\nno node logs in ", logs_dir, "\n");
  std::string out;
  for (const std::string& path : logs) {
    absl::StrAppend(&out, "\n--- the last lines of ", path, " ---\n",
                    launcher::LogTail(path, max_lines));
  }
  return out;
}

std::vector<std::string> Lines(absl::string_view text) {
  return absl::StrSplit(text, absl::ByAnyChar("\r\n"), absl::SkipEmpty());
}

absl::StatusOr<ProcessResult> RunSkipswarm(const std::vector<std::string>& args,
                                           const std::string& workdir) {
  const std::string binary = SkipswarmBinary();
  if (binary.empty()) {
    return absl::FailedPreconditionError(
        "$SKIPSWARM_BINARY is unset: build the test with ss_binary_test (tests/defs.bzl)");
  }
  // stdout and stderr go to files, not pipes: the child may write more than
  // a pipe holds, and reading two pipes without blocking needs a poll loop.
  std::string capture = TempRoot() + "/capture-XXXXXX";
  if (mkdtemp(capture.data()) == nullptr) {
    return absl::UnavailableError(absl::StrCat("mkdtemp: ", std::strerror(errno)));
  }
  const std::string out_path = capture + "/stdout", err_path = capture + "/stderr";

  std::vector<std::string> argv_text = {binary};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);

  const pid_t pid = fork();
  if (pid < 0) return absl::UnavailableError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    const int o = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0 || chdir(workdir.c_str()) != 0) {
      _exit(126);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return absl::UnavailableError(absl::StrCat("waitpid: ", std::strerror(errno)));
  }
  ProcessResult result;
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  SS_ASSIGN_OR_RETURN(result.out, ReadFile(out_path));
  SS_ASSIGN_OR_RETURN(result.err, ReadFile(err_path));
  return result;
}

}  // namespace skipswarm::tests
