#include "node/daemon/reporting/daemon_reporting.h"

#include <glog/logging.h>

#include <cstdio>
#include <string>

#include "common/status_macros.h"
#include "node/daemon/reporting/iteration_report.h"

namespace skipswarm::node {

absl::StatusOr<std::unique_ptr<MetricsServer>> StartDaemonMetricsServer(
    const NodeDaemonOptions& o, Metrics* metrics) {
  if (o.metrics_port < 0) return std::unique_ptr<MetricsServer>();
  SS_ASSIGN_OR_RETURN(std::unique_ptr<MetricsServer> server,
                      MetricsServer::Start(metrics, o.metrics_host, o.metrics_port));
  LOG(INFO) << o.name << ": /metrics on " << o.metrics_host << ":" << server->port();
  return server;
}

void PrintProgressAndCheckpoint(const NodeDaemonOptions& o, const NodeIterationReport& r,
                                double elapsed_s, Metrics* metrics,
                                absl::FunctionRef<absl::Status()> checkpoint) {
  const std::string line = ReportIteration(o.name, r, elapsed_s, o.progress_file, metrics);
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  const int64_t done = static_cast<int64_t>(r.iteration) + 1;
  if (o.checkpoint_every > 0 && done % o.checkpoint_every == 0 && done < o.iterations) {
    absl::Status s = checkpoint();
    if (!s.ok()) LOG(ERROR) << "checkpoint failed: " << s;
  }
}

}  // namespace skipswarm::node
