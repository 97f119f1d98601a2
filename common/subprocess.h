// Runs a short-lived helper program (e.g. `nvidia-smi --query-...`) and
// returns what it printed, bounded in time and size: a hung helper is
// killed at its deadline instead of hanging the caller.
//
//   SS_ASSIGN_OR_RETURN(std::string out,
//                       common::RunSubprocess({"nvidia-smi", "-L"}, absl::Seconds(5)));
//
// The deadline is real time by nature (a child process runs on the real
// clock), like a gRPC deadline; it lives in common/ with the other real-time
// code.
//
// Thread rule: thread-safe (posix_spawn, no shared state); the calling
// thread blocks until the child exits or the deadline passes.
#ifndef SKIPSWARM_COMMON_SUBPROCESS_H_
#define SKIPSWARM_COMMON_SUBPROCESS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace skipswarm::common {

// Runs argv[0] (looked up in PATH) with `argv`, stdin from /dev/null.
// Returns its stdout (at most `max_output` bytes; the rest is read and
// dropped) when it exits with status 0. Errors, each naming the program:
// NotFound when it cannot be started, DeadlineExceeded when it ran past
// `timeout` (it is then SIGKILLed and reaped), Unavailable when it exited
// non-zero or was killed by a signal (with the start of its stderr),
// InvalidArgument for an empty argv.
absl::StatusOr<std::string> RunSubprocess(const std::vector<std::string>& argv,
                                          absl::Duration timeout,
                                          size_t max_output = 1 << 20);

}  // namespace skipswarm::common

#endif  // SKIPSWARM_COMMON_SUBPROCESS_H_
