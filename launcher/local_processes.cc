#include "launcher/local_processes.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/match.h"

namespace skipswarm::launcher {

absl::StatusOr<pid_t> SpawnNode(const std::string& dir, const std::string& name,
                                const std::string& config) {
  const pid_t pid = fork();
  if (pid < 0) return absl::UnavailableError("fork failed");
  if (pid == 0) {
    // Its own process group: a terminal's Ctrl-C (SIGINT to the foreground
    // group) reaches only the launcher, which forwards one stop. A node that
    // got the terminal's SIGINT and then the launcher's took the second as
    // "exit at once" and left no checkpoint (Note [Stopping] in
    // node/daemon/gossip/gossip_daemon.cc).
    setpgid(0, 0);
    const std::string log = absl::StrCat(dir, "/logs/", name);
    int o = open((log + ".out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int e = open((log + ".err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(o, 1);
    dup2(e, 2);
    const std::string cfg = "--config=" + config;
    execl("/proc/self/exe", "skipswarm", "node", cfg.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

bool ReportedAnIteration(const std::string& dir, const std::string& name) {
  std::ifstream in(absl::StrCat(dir, "/logs/", name, ".out"));
  const std::string mark = absl::StrCat("[", name, "] it ");
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, mark)) return true;
  }
  return false;
}

namespace {

// The usual signals by name: strsignal's text is locale-dependent prose.
const char* SignalName(int sig) {
  switch (sig) {
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGINT: return "SIGINT";
    case SIGKILL: return "SIGKILL";
    case SIGPIPE: return "SIGPIPE";
    case SIGSEGV: return "SIGSEGV";
    case SIGTERM: return "SIGTERM";
    default: return nullptr;
  }
}

}  // namespace

std::string DescribeEnd(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with code ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = SignalName(sig);
    return absl::StrCat("killed by signal ", sig,
                        name != nullptr ? absl::StrCat(" (", name, ")") : "",
                        WCOREDUMP(status) ? ", core dumped" : "");
  }
  return absl::StrCat("ended with wait status ", status);
}

std::string LogTail(const std::string& path, int max_lines, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in || max_lines <= 0) return "";
  const std::streamoff size = in.tellg();
  if (size <= 0) return "";
  const std::streamoff from = size > static_cast<std::streamoff>(max_bytes)
                                  ? size - static_cast<std::streamoff>(max_bytes)
                                  : 0;
  in.seekg(from);
  std::string text(static_cast<size_t>(size - from), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  // A cut first line is dropped (it starts mid-line); so is the empty
  // piece after a final newline.
  if (from > 0 && !lines.empty()) lines.erase(lines.begin());
  while (!lines.empty() && absl::StripAsciiWhitespace(lines.back()).empty()) lines.pop_back();
  const size_t keep = std::min(lines.size(), static_cast<size_t>(max_lines));
  std::string out;
  for (size_t i = lines.size() - keep; i < lines.size(); ++i) {
    absl::StrAppend(&out, "  ", lines[i], "\n");
  }
  return out;
}

std::string DescribeNodeEnd(const std::string& dir, const LocalChild& c, int max_lines) {
  const std::string log = absl::StrCat(dir, "/logs/", c.name, ".err");
  const std::string tail = LogTail(log, max_lines);
  return absl::StrCat("node ", c.name, " ", DescribeEnd(c.status),
                      tail.empty() ? absl::StrCat("; ", log, " is empty\n")
                                   : absl::StrCat("; the last lines of ", log, ":\n", tail));
}

void RecordExit(const struct rusage& ru, LocalChild& c) {
  c.exited = true;
  c.cpu_s = ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
            1e-6 * (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
  c.max_rss_kib = ru.ru_maxrss;
}

absl::StatusOr<std::map<std::string, int64_t>> ParseKillPlan(
    absl::string_view flag, const std::map<std::string, int64_t>& planned,
    const std::vector<std::string>& nodes, bool joiner) {
  std::map<std::string, int64_t> kills;
  for (absl::string_view k : absl::StrSplit(flag, ',', absl::SkipEmpty())) {
    std::vector<std::string> p = absl::StrSplit(k, '@');
    int64_t at;
    if (p.size() != 2 || !absl::SimpleAtoi(p[1], &at)) {
      return absl::InvalidArgumentError(absl::StrCat("--kill entry '", k, "' is not NAME@ITER"));
    }
    if (at < 0) {
      return absl::InvalidArgumentError(absl::StrCat("--kill entry '", k, "': ITER must be >= 0"));
    }
    kills[p[0]] = at;
  }
  kills.insert(planned.begin(), planned.end());  // the flag's win
  for (const auto& [name, at] : kills) {
    if (!(name == "j0" && joiner) && std::find(nodes.begin(), nodes.end(), name) == nodes.end()) {
      return absl::InvalidArgumentError(absl::StrCat("--kill names no node: '", name,
                                                     "' (the nodes are ",
                                                     absl::StrJoin(nodes, ", "), ")"));
    }
  }
  return kills;
}

}  // namespace skipswarm::launcher
