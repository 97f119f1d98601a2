// Runs the built `skipswarm` binary the way a user does, for tests under
// tests/ (tests/README.md): a child process with its own working folder,
// its stdout and stderr captured whole, its exit status reported.
//
//   std::string dir = *MakeTestDir("plan");
//   ProcessResult r = *RunSkipswarm({"plan", "--scenario=" + RunfilePath(f)}, dir);
//   EXPECT_EQ(r.exit_code, 0) << r.err;
//
// The binary comes from the test's runfiles: tests/defs.bzl's
// ss_binary_test puts it there and names it in $SKIPSWARM_BINARY. Nothing
// here sleeps or picks ports; the child inherits the test's environment.
//
// Thread rule: functions only; RunSkipswarm blocks the calling thread until
// the child exits (Bazel's test timeout bounds a child that hangs).
#ifndef SKIPSWARM_TESTS_HARNESS_SKIPSWARM_PROCESS_H_
#define SKIPSWARM_TESTS_HARNESS_SKIPSWARM_PROCESS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace skipswarm::tests {

struct ProcessResult {
  int exit_code = -1;  // exit status; -1 when a signal ended the process
  int signal = 0;      // the signal that ended it, or 0
  std::string out;     // all of stdout
  std::string err;     // all of stderr
};

// Absolute path of the binary under test ($SKIPSWARM_BINARY, relative to
// the runfiles root). Empty if the test was not built by ss_binary_test.
std::string SkipswarmBinary();

// Absolute path of a runfile given relative to the workspace root, e.g.
// "sim/scenarios/churn-42.json" (the target must list it in `data`).
std::string RunfilePath(absl::string_view workspace_relative);

// A fresh, empty folder $TEST_TMPDIR/<name> (removed first if present).
absl::StatusOr<std::string> MakeTestDir(absl::string_view name);

// Runs `skipswarm <args...>` with `workdir` as its working folder and
// waits for it. Fails only if the process cannot be started or its output
// cannot be read back; a non-zero exit is a result, not an error.
absl::StatusOr<ProcessResult> RunSkipswarm(const std::vector<std::string>& args,
                                           const std::string& workdir);

// The last `max_lines` lines of every node log (LOGS_DIR/*.err, by name),
// each under a heading, for a failure message: a `skipswarm local` run's
// folder is in the test's temporary folder, gone once the test ends, so a
// CI failure keeps only what the test prints. "no node logs in LOGS_DIR"
// when there are none.
std::string NodeLogTails(const std::string& logs_dir, int max_lines = 25);

// The whole content of a file.
absl::StatusOr<std::string> ReadFile(const std::string& path);
// Writes `text` to `path`, replacing it.
absl::Status WriteFile(const std::string& path, absl::string_view text);

// `text` cut at '\n' and '\r' (progress bars redraw with '\r'), empty
// lines dropped.
std::vector<std::string> Lines(absl::string_view text);

}  // namespace skipswarm::tests

#endif  // SKIPSWARM_TESTS_HARNESS_SKIPSWARM_PROCESS_H_
