// What replica averaging costs per iteration (Note [Outer steps] in
// node/train/node_trainer.h), from the replica groups' sizes, the stage's
// parameter count, the averaging codec, H and the members' uplinks: the
// figure the compute-only evaluator (evaluator.h) leaves out and that sets
// the pace on home uplinks.
//
// Model: a stage group of R replicas averages with the sharded reduce
// (node/train/sharded_reduce.h): each replica uploads its vector's
// R-1 foreign shards and then the reduced shard to the R-1 others, encoded
// by the codec (WireBytesPerReplica, model/averaging_options.h: 2 (R-1)/R
// x AveragedBytes for fp32 / bf16 / int8). Uploads run in parallel, so the
// group's sync takes the slowest member's upload time (latency ignored);
// groups run in parallel too, so a sync takes the slowest group's time.
// Without overlap each iteration pays sync_s / H on average; with
// --outer_overlap (Note [Overlapped sync] in node/train/node_trainer.h)
// a sync runs under the next H iterations' compute and costs only what
// exceeds them (SecondsPerIteration).
//
//   std::vector<AveragingGroup> g = {{/*replicas=*/2, /*params=*/44e6, {2.5e6, 6.25e6}}};
//   AveragingCost c = CostAveraging(g, options);   // c.seconds_per_iteration
//
// Thread rule: pure functions.
#ifndef SKIPSWARM_SCHEDULER_AVERAGING_COST_H_
#define SKIPSWARM_SCHEDULER_AVERAGING_COST_H_

#include <vector>

#include "model/averaging_options.h"

namespace skipswarm::scheduler {

struct AveragingGroup {
  int stage = 0;
  double params = 0;  // the stage's parameter count
  // Each replica's uplink in bytes/s (<= 0: unlimited, costs no time).
  std::vector<double> uplink_bytes_per_s;
};

struct AveragingCost {
  double bytes_per_sync = 0;        // uploaded by all replicas of all groups, one sync
  double bytes_per_iteration = 0;   // bytes_per_sync / H
  double sync_s = 0;                // the slowest group's sync
  double seconds_per_iteration = 0; // sync_s / H
  int slowest_stage = -1;
};

AveragingCost CostAveraging(const std::vector<AveragingGroup>& groups,
                            const model::AveragingOptions& options);

// What averaging adds to an iteration of `compute_s` seconds: sync_s / H,
// or with overlap (H > 1) max(0, sync_s - H compute_s) / H.
double SecondsPerIteration(const AveragingCost& c, const model::AveragingOptions& options,
                           double compute_s);

}  // namespace skipswarm::scheduler

#endif  // SKIPSWARM_SCHEDULER_AVERAGING_COST_H_
