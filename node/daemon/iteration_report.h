// What a daemon makes of each finished iteration (NodeTrainer's report):
// the Prometheus gauges and counters, the one-line progress log, and the
// JSON line a data node appends to its progress file. Shared by both
// daemons (static --swarm and gossip) so they report alike.
//
//   std::string line = ReportIteration(name, report, elapsed_s, progress_file, &metrics);
//   std::printf("%s\n", line.c_str());
//
// Thread rule: as Metrics (thread-safe); the progress file is appended by
// one caller at a time (the trainer's iteration callback).
#ifndef SKIPSWARM_NODE_DAEMON_ITERATION_REPORT_H_
#define SKIPSWARM_NODE_DAEMON_ITERATION_REPORT_H_

#include <string>

#include "node/daemon/metrics.h"
#include "node/train/node_trainer.h"

namespace skipswarm::node {

// Exports `r` into `metrics`, appends a JSON line to `progress_file` (data
// nodes; empty: none) and returns the progress line, without a newline.
// `elapsed_s` is the time since training started on this node.
std::string ReportIteration(const std::string& node_name, const NodeIterationReport& r,
                            double elapsed_s, const std::string& progress_file,
                            Metrics* metrics);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_ITERATION_REPORT_H_
