#include "common/logging.h"

#include <glog/logging.h>

#include <atomic>

namespace skipswarm::common {

void InitLogging(const char* argv0, const LoggingOptions& options) {
  static std::atomic<bool> initialised{false};
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = options.min_log_level;
  FLAGS_v = options.verbosity;
  if (initialised.exchange(true)) return;
  google::InitGoogleLogging(argv0);
  google::InstallFailureSignalHandler();
}

}  // namespace skipswarm::common
