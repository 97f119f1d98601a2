#include "node/daemon/reporting/daemon_reporting.h"

#include <glog/logging.h>

#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/stamp/git_commit.h"
#include "common/status_macros.h"
#include "node/daemon/reporting/iteration_report.h"
#include "node/daemon/reporting/status_page.h"
#include "proto/version.h"

namespace skipswarm::node {

absl::StatusOr<std::unique_ptr<MetricsServer>> StartDaemonMetricsServer(
    const NodeDaemonOptions& o, Metrics* metrics, const StatusBoard* status) {
  if (o.metrics_port < 0) return std::unique_ptr<MetricsServer>();
  metrics->Set("skipswarm_build_info", 1,
               absl::StrCat("version=\"", proto::kSoftwareVersion, "\",git_commit=\"",
                            common::GitCommit(), "\",libtorch_version=\"", o.libtorch_version, "\""));
  SS_ASSIGN_OR_RETURN(std::unique_ptr<MetricsServer> server,
                      MetricsServer::Start(metrics, o.metrics_host, o.metrics_port,
                                           status != nullptr ? StatusPages(status)
                                                             : std::vector<HttpPage>()));
  LOG(INFO) << o.name << ": /metrics on " << o.metrics_host << ":" << server->port()
            << (status != nullptr ? "; status page on the same port (GET /, /status.json)" : "");
  return server;
}

std::unique_ptr<StatusBoard> MakeDaemonStatusBoard(const NodeDaemonOptions& o,
                                                   const std::string& mode,
                                                   const std::string& node_id,
                                                   common::Clock* clock) {
  StatusBoardOptions so;
  so.node_name = o.name;
  so.node_id = node_id;
  so.mode = mode;
  so.num_stages = o.model.model.num_stages;
  so.version = absl::StrCat(proto::kSoftwareVersion, " (commit ", common::GitCommit(),
                            ", libtorch ", o.libtorch_version, ")");
  return std::make_unique<StatusBoard>(so, clock);
}

absl::Status ParseMetricsListen(const std::string& value, NodeDaemonOptions* o) {
  const size_t colon = value.rfind(':');
  std::string host = colon == std::string::npos ? "" : value.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  int port = -1;
  if (host.empty() || !absl::SimpleAtoi(value.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics_listen=", value, ": expected HOST:PORT (127.0.0.1:9464, 0.0.0.0:0, [::1]:9464)"));
  }
  o->metrics_host = host;
  o->metrics_port = port;
  return absl::OkStatus();
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
