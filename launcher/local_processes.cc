#include "launcher/local_processes.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "absl/status/status.h"
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
