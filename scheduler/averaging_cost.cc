#include "scheduler/averaging_cost.h"

#include <algorithm>

namespace skipswarm::scheduler {

AveragingCost CostAveraging(const std::vector<AveragingGroup>& groups,
                            const model::AveragingOptions& options) {
  AveragingCost c;
  for (const AveragingGroup& g : groups) {
    const int r = static_cast<int>(g.uplink_bytes_per_s.size());
    if (r < 2) continue;  // nothing to average
    const double per_replica = model::WireBytesPerReplica(options.codec, g.params, r);
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

double SecondsPerIteration(const AveragingCost& c, const model::AveragingOptions& options,
                           double compute_s) {
  const double h = static_cast<double>(std::max<int64_t>(1, options.outer_every));
  if (!options.overlap || options.outer_every < 2) return c.sync_s / h;
  return std::max(0.0, c.sync_s - h * compute_s) / h;
}

}  // namespace skipswarm::scheduler
