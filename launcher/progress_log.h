// The launcher's reading of the daemons' progress.jsonl (one JSON object per
// line, written by node/daemon/reporting/iteration_report.cc): the loss per
// iteration from the data nodes' lines and the re-routes of every node.
//
//   std::map<int64_t, ProgressPoint> points;
//   int64_t rerouted = 0;
//   ReadProgress(dir + "/progress.jsonl", points, rerouted);
//
// Thread rule: plain functions.
#ifndef SKIPSWARM_LAUNCHER_PROGRESS_LOG_H_
#define SKIPSWARM_LAUNCHER_PROGRESS_LOG_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace skipswarm::launcher {

// One iteration, over the data nodes' lines.
struct ProgressPoint {
  double loss_sum = 0;  // over the data nodes that reported a finite loss
  int n = 0;            // how many did
  int completed = 0;    // micro-batches that finished, over every data node
  int dropped = 0;
  double tokens = 0;
  double elapsed = 0;   // the latest elapsed_s of the iteration's lines
  int64_t rerouted = 0; // "rerouted_here" of every node's line of the iteration
  // "avg_bytes" of every node's line of the iteration: payload bytes the
  // replicas contributed to stage averages (Note [Outer steps]).
  double avg_bytes = 0;
};

// Replaces `points` with the data nodes' lines of `path` (those with an
// iteration and a loss; a loss < 0 stands for a non-finite one and is left
// out of the mean) and sets `rerouted` to the sum of every line's
// "rerouted_here" (each point's `rerouted` gets its iteration's). Lines that are not JSON objects (a line cut short while
// its writer runs) are skipped.
void ReadProgress(const std::string& path, std::map<int64_t, ProgressPoint>& points,
                  int64_t& rerouted);

// Pipeline frames a node exchanged with other nodes ("frames_sent",
// "frames_received" of its lines: counts since it started, so the largest
// of each). An SDP node's stay 0 (Note [Mixed local swarm]).
struct NodeFrames {
  int64_t sent = 0;
  int64_t received = 0;
};
std::map<std::string, NodeFrames> ReadNodeFrames(const std::string& path);

// Something that happened during the run, after iteration `iteration`.
struct RunEvent {
  int64_t iteration = 0;
  std::string what;  // "s1r1 killed"
};

// Writes DIR/loss.csv (iteration, loss, dropped, elapsed_s, rerouted,
// avg_bytes) and
// DIR/loss.svg: the mean loss per iteration with axes and units, red
// vertical markers for `events`, dashed orange ones for iterations with
// re-routes and red dots for iterations that dropped micro-batches.
void WriteLossSummary(const std::string& dir, const std::map<int64_t, ProgressPoint>& points,
                      const std::vector<RunEvent>& events);

}  // namespace skipswarm::launcher

#endif  // SKIPSWARM_LAUNCHER_PROGRESS_LOG_H_
