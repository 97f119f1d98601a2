#include "scheduler/averaging_cost.h"

#include <algorithm>

namespace skipswarm::scheduler {

AveragingCost CostAveraging(const std::vector<AveragingGroup>& groups,
                            const model::AveragingOptions& options) {
  AveragingCost c;
  for (const AveragingGroup& g : groups) {
    const int r = static_cast<int>(g.uplink_bytes_per_s.size());
    if (r < 2) continue;  // nothing to average
    const double vector_bytes = model::AveragedBytes(options.codec, g.params);
    const double per_replica = 2.0 * (r - 1) / r * vector_bytes;
    c.bytes_per_sync += r * per_replica;
    double slowest = 0;
    for (double up : g.uplink_bytes_per_s) {
      if (up > 0) slowest = std::max(slowest, per_replica / up);
    }
    if (slowest > c.sync_s) {
      c.sync_s = slowest;
      c.slowest_stage = g.stage;
    }
  }
  const double h = static_cast<double>(std::max<int64_t>(1, options.outer_every));
  c.bytes_per_iteration = c.bytes_per_sync / h;
  c.seconds_per_iteration = c.sync_s / h;
  return c;
}

}  // namespace skipswarm::scheduler
