// Recorded routes: the skip routes a swarm's data nodes ran, one micro-batch
// per line, so that `skipswarm train-ref --routes_file=FILE` can train the
// same micro-batches along the same stages (`skipswarm local
// --local_record_routes` writes them; node/daemon/stack/route_recorder.h).
//
// Format (a common/text_table.h table, `#` comments):
//
//   # ITERATION GLOBAL_MB ORIGIN NODE/STAGE ...   (the route, origin first)
//   0 0 d0 3f2a91c0/0 77b0e1d2/1 a1c3f409/2
//   0 4 d1 9c01aa2e/0 77b0e1d2/1 a1c3f409/2
//
// GLOBAL_MB is the micro-batch's number in the shared sampler (Note [Data
// order] in node/train/data_source.h); NODE is for people (a short node id),
// only the stages count for training. When the same (ITERATION, GLOBAL_MB)
// appears twice (a data node restarted mid-iteration and planned it again),
// the later line wins.
//
//   SS_ASSIGN_OR_RETURN(RouteRecord r, ReadRouteRecord({"d0.routes", "d1.routes"}));
//   for (const RecordedRoute& mb : r[7]) ...   // iteration 7, by GLOBAL_MB
//
// Thread rule: free functions, no state.
#ifndef SKIPSWARM_MODEL_ROUTE_RECORD_H_
#define SKIPSWARM_MODEL_ROUTE_RECORD_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace skipswarm::model {

struct RecordedRoute {
  int64_t iteration = 0;
  uint64_t global_mb = 0;
  std::string origin;              // the data node's name
  std::vector<std::string> nodes;  // per hop, for people
  std::vector<int> stages;         // per hop; stages[0] == 0
};

// Iteration -> its micro-batches, ascending GLOBAL_MB.
using RouteRecord = std::map<int64_t, std::vector<RecordedRoute>>;

// One line, newline included. REQUIRES: nodes.size() == stages.size() > 0;
// names without whitespace or '/'.
std::string FormatRecordedRoute(const RecordedRoute& r);

// Adds `text`'s lines to `*record`. InvalidArgument naming the line: too few
// fields, a bad number, a hop that is not NODE/STAGE, a route that does not
// start on stage 0.
absl::Status ParseRouteRecord(absl::string_view text, RouteRecord* record);

// Reads and merges every file (in order; later lines win).
absl::StatusOr<RouteRecord> ReadRouteRecord(const std::vector<std::string>& paths);

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_ROUTE_RECORD_H_
