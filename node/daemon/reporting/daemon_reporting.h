// What both daemons (NodeDaemon over a static --swarm list, GossipDaemon
// over gossip) report the same way: the /metrics server they start, and
// what they do with each finished iteration — print its progress line
// (ReportIteration, iteration_report.h) and checkpoint every
// --checkpoint_every iterations. What differs (gossip's live members and
// compute speed, its stage moves) stays with the daemon.
//
//   SS_ASSIGN_OR_RETURN(metrics_server, StartDaemonMetricsServer(options, &metrics));
//   ...
//   // in the trainer's iteration callback:
//   PrintProgressAndCheckpoint(options, report, elapsed_s, &metrics,
//                              [&] { return Checkpoint(); });
//
// Thread rule: StartDaemonMetricsServer on the daemon's main thread;
// PrintProgressAndCheckpoint on the trainer's callback thread (one call at
// a time, as ReportIteration's progress file needs).
#ifndef SKIPSWARM_NODE_DAEMON_REPORTING_DAEMON_REPORTING_H_
#define SKIPSWARM_NODE_DAEMON_REPORTING_DAEMON_REPORTING_H_

#include <memory>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "node/daemon/reporting/metrics.h"
#include "node/daemon/reporting/status_board.h"
#include "node/daemon/stack/node_daemon_options.h"
#include "node/train/node_trainer.h"

namespace skipswarm::node {

// Serves `metrics` on o.metrics_host:o.metrics_port (0: any free port) and
// logs where; null when o.metrics_port < 0 (off). Sets skipswarm_build_info.
// With `status`, the same port serves the live status page too (GET / and
// /status.json, status_page.h). `metrics` and `status` must outlive the
// server.
absl::StatusOr<std::unique_ptr<MetricsServer>> StartDaemonMetricsServer(
    const NodeDaemonOptions& o, Metrics* metrics, const StatusBoard* status = nullptr);

// The status page's board of a daemon: o.name, `node_id` (hex), `mode`
// ("gossip" or "static"), the model's stage count, this build's version.
// `clock` must outlive it.
std::unique_ptr<StatusBoard> MakeDaemonStatusBoard(const NodeDaemonOptions& o,
                                                   const std::string& mode,
                                                   const std::string& node_id,
                                                   common::Clock* clock);

// Parses --metrics_listen's HOST:PORT ([v6]:port for IPv6; PORT 0: any
// free port) into o->metrics_host and o->metrics_port; an error names the
// flag.
absl::Status ParseMetricsListen(const std::string& value, NodeDaemonOptions* o);

// Reports `r` (ReportIteration into `metrics` and o.progress_file), prints
// its progress line to stdout and flushes; then, when iteration r + 1 is a
// multiple of o.checkpoint_every (> 0) and not the last one (the daemon
// checkpoints at the end anyway), calls `checkpoint` and logs its failure.
// `elapsed_s`: seconds since training started on this node.
void PrintProgressAndCheckpoint(const NodeDaemonOptions& o, const NodeIterationReport& r,
                                double elapsed_s, Metrics* metrics,
                                absl::FunctionRef<absl::Status()> checkpoint);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_REPORTING_DAEMON_REPORTING_H_
