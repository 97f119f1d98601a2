// What `skipswarm local` prints about a run: the live progress line while
// it trains and the summary once every node exited (failed nodes,
// throughput, peak memory, averaging bytes, where the outputs are), and
// the final verdict on whether the run trained at all.
//
//   PrintProgressLine(reported, iterations, points, secs, rerouted);
//   ...
//   const int failed = PrintRunSummary(dir, children, points, wall_s);
//   SS_RETURN_IF_ERROR(CheckTrained(points, iterations, interrupted));
//
// Thread rule: plain functions writing to stdout.
#ifndef SKIPSWARM_LAUNCHER_LOCAL_REPORT_H_
#define SKIPSWARM_LAUNCHER_LOCAL_REPORT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "launcher/local_processes.h"
#include "launcher/progress_log.h"

namespace skipswarm::launcher {

// "1m05s", "42s" (the progress bar's ETA); negative seconds are 0.
std::string FormatEta(double s);

// Rewrites the progress line (carriage return, no newline): a bar, the
// iteration `reported` + 1 of `iterations`, rate and ETA from `secs`
// (training seconds on the daemons' clocks up to `reported`), the latest
// point's mean loss, tokens per second, re-routes and dropped micro-batches.
// The latest point's loss reads "--" when none of its micro-batches
// finished (every route lost a node) and "non-finite" when they finished
// without a finite loss; never "nan" (Note [No loss is not a loss]).
// REQUIRES: `points` is not empty and its last key is `reported`.
void PrintProgressLine(int64_t reported, int64_t iterations,
                       const std::map<int64_t, ProgressPoint>& points, double secs,
                       int64_t rerouted);

// The text of that line, without the carriage return.
std::string FormatProgressLine(int64_t reported, int64_t iterations,
                               const std::map<int64_t, ProgressPoint>& points, double secs,
                               int64_t rerouted);

// Prints the end-of-run summary of `children` (all exited): a line per node
// that neither exited 0 nor was SIGKILLed (the launcher's kills), then
// throughput over `wall_s` training seconds and the nodes' CPU seconds, peak
// RSS per node, averaging bytes and where DIR's outputs are. Returns how many
// nodes failed.
int PrintRunSummary(const std::string& dir, const std::vector<LocalChild>& children,
                    const std::map<int64_t, ProgressPoint>& points, double wall_s);

// Never a silent success: DataLoss when no iteration trained, when the last
// one's mean loss is not finite, or when fewer than `iterations` trained and
// the run was not `interrupted`; Ok otherwise. In an interrupted run the
// last iteration may have been cut short by the stop (no micro-batch of any
// data node finished, none had a loss): the iteration before it is judged.
// A non-finite loss of finished micro-batches always fails.
absl::Status CheckTrained(const std::map<int64_t, ProgressPoint>& points, int64_t iterations,
                          bool interrupted);

}  // namespace skipswarm::launcher

#endif  // SKIPSWARM_LAUNCHER_LOCAL_REPORT_H_
