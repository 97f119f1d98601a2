// Process-wide logging setup (glog). Called once by `main`; libraries only
// use LOG / VLOG / CHECK from <glog/logging.h>.
//
//   int main(int argc, char** argv) {
//     common::InitLogging(argv[0]);
//     ...
//   }
#ifndef SKIPSWARM_COMMON_LOGGING_H_
#define SKIPSWARM_COMMON_LOGGING_H_

namespace skipswarm::common {

struct LoggingOptions {
  // Minimum severity written to stderr: 0 INFO, 1 WARNING, 2 ERROR.
  int min_log_level = 0;
  // glog verbosity for VLOG(n).
  int verbosity = 0;
};

// Sends logs to stderr (no log files), installs glog's failure signal
// handler (stack trace on crash). Safe to call more than once.
void InitLogging(const char* argv0, const LoggingOptions& options = {});

}  // namespace skipswarm::common

#endif  // SKIPSWARM_COMMON_LOGGING_H_
