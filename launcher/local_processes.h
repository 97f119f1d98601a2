// The node processes of `skipswarm local`: a forked `skipswarm node --config=CONFIG` with its
// stdout/stderr in DIR/logs/NAME.{out,err}, and the bookkeeping of a
// child once it exited (its status, CPU seconds and peak memory), and the
// --kill fault plan naming which of them to SIGKILL when.
//
//   LocalChild c{"d0"};
//   SS_ASSIGN_OR_RETURN(c.pid, SpawnNode(dir, c.name, dir + "/d0.json"));
//   struct rusage ru {};
//   if (wait4(c.pid, &c.status, WNOHANG, &ru) == c.pid) RecordExit(ru, c);
//
// Thread rule: plain functions; SpawnNode forks, so call it from the
// launcher's one thread only.
#ifndef SKIPSWARM_LAUNCHER_LOCAL_PROCESSES_H_
#define SKIPSWARM_LAUNCHER_LOCAL_PROCESSES_H_

#include <sys/resource.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace skipswarm::launcher {

// One node process the launcher started.
struct LocalChild {
  std::string name;
  pid_t pid = -1;
  bool exited = false;
  int status = 0;           // wait4's status, once exited
  double cpu_s = 0;         // user + system CPU seconds, once exited (wait4)
  int64_t max_rss_kib = 0;  // peak resident set, once exited (wait4)
};

// Forks and execs this binary as `skipswarm node --config=CONFIG`, its
// stdout/stderr in DIR/logs/NAME.out and .err. REQUIRES: DIR/logs exists.
// Returns the child's pid; Unavailable when fork fails.
absl::StatusOr<pid_t> SpawnNode(const std::string& dir, const std::string& name,
                                const std::string& config);

// Marks `c` exited with the CPU seconds and peak RSS of `ru` (wait4's);
// `c.status` is the caller's (wait4 writes it).
void RecordExit(const struct rusage& ru, LocalChild& c);

// Whether node NAME printed a progress line ("[NAME] it N", one per
// iteration it trained) to DIR/logs/NAME.out: it serves its stage (Note
// [Survivable chaos] in launcher/local_chaos.h). False while the file is
// missing or holds none.
bool ReportedAnIteration(const std::string& dir, const std::string& name);

// How a node ended, from wait4's `status`: "exited with code 1", "killed
// by signal 11 (SIGSEGV)". A node that died of a signal (a crash, the
// kernel's OOM killer) must not read as one that gave up (Note [How a node
// ended]).
std::string DescribeEnd(int status);

// Note [How a node ended]: when a node the launcher did not kill ends
// early, its end alone rarely says why; the cause is in the last lines of
// its log, and the run's folder (with the logs) is often gone by the time
// anyone looks (a test's temporary folder, a CI machine). So the launcher
// prints how it ended and the last lines of its stderr log (the daemon's
// LOG lines and its error) with the failure, into its own output, which
// the caller keeps.
//
// The last `max_lines` lines of `path`, each indented by two spaces,
// reading at most the file's last `max_bytes` (a log may be large); empty
// when the file is missing or empty.
std::string LogTail(const std::string& path, int max_lines, size_t max_bytes = 16 << 10);

// "node s2r0 exited with code 1; the last lines of DIR/logs/s2r0.err:\n..."
// for `c` (exited), with LogTail's lines of its stderr log.
std::string DescribeNodeEnd(const std::string& dir, const LocalChild& c, int max_lines = 20);

// The fault plan: node name -> iteration after which it is SIGKILLed, from
// `flag` (NAME@ITER,...) plus `planned` (a WAN scenario's; the flag's win).
// InvalidArgument for an entry that is not NAME@ITER with ITER >= 0, or that
// names none of `nodes` (nor j0 when `joiner` is started): a fault
// experiment must not "pass" without its fault.
absl::StatusOr<std::map<std::string, int64_t>> ParseKillPlan(
    absl::string_view flag, const std::map<std::string, int64_t>& planned,
    const std::vector<std::string>& nodes, bool joiner);

}  // namespace skipswarm::launcher

#endif  // SKIPSWARM_LAUNCHER_LOCAL_PROCESSES_H_
