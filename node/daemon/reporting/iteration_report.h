// What a daemon makes of each finished iteration (NodeTrainer's report):
// the Prometheus gauges and counters, the one-line progress log, and the
// JSON line it appends to its progress file. Shared by both daemons
// (static --swarm and gossip) so they report alike.
//
// Re-routes: every node's line ends in "| rerouted N (total T)": N hops its
// own server re-routed in this iteration (NodeIterationReport::
// rerouted_here; as a data node or as a relay), T since it started (also
// skipswarm_micro_batches_rerouted_total). In the progress file a data
// node's line has "rerouted" (T, as before) and "rerouted_here" (N) beside
// its loss and tokens; a relay's line has only node, iteration and
// "rerouted_here", so summing "rerouted_here" over all lines counts every
// re-route in the swarm once. Both kinds of line carry "frames_sent" and
// "frames_received": the pipeline frames the node exchanged with other
// nodes since it started (local hops excluded; an SDP node's stay 0).
//
//   std::string line = ReportIteration(name, report, elapsed_s, progress_file, &metrics);
//   std::printf("%s\n", line.c_str());
//
// Thread rule: as Metrics (thread-safe); the progress file is appended by
// one caller at a time (the trainer's iteration callback).
#ifndef SKIPSWARM_NODE_DAEMON_REPORTING_ITERATION_REPORT_H_
#define SKIPSWARM_NODE_DAEMON_REPORTING_ITERATION_REPORT_H_

#include <string>

#include "node/daemon/reporting/metrics.h"
#include "node/train/node_trainer.h"

namespace skipswarm::node {

// Exports `r` into `metrics`, appends a JSON line to `progress_file` (data
// nodes; empty: none) and returns the progress line, without a newline.
// `elapsed_s` is the time since training started on this node.
std::string ReportIteration(const std::string& node_name, const NodeIterationReport& r,
                            double elapsed_s, const std::string& progress_file,
                            Metrics* metrics);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_REPORTING_ITERATION_REPORT_H_
