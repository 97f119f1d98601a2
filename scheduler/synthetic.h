// Synthetic swarms for benchmarks, the simulator and tests: nodes scattered
// over a few regions on a plane, latency growing with distance, bandwidth
// and compute speed drawn at random, stages filled evenly.
//
//   SyntheticOptions o;
//   o.num_nodes = 100;
//   o.num_stages = 8;
//   SS_ASSIGN_OR_RETURN(Scenario sc, MakeSyntheticScenario(o));
//
// Deterministic in `seed`. Thread rule: pure function.
#ifndef SKIPSWARM_SCHEDULER_SYNTHETIC_H_
#define SKIPSWARM_SCHEDULER_SYNTHETIC_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "scheduler/scenario.h"

namespace skipswarm::scheduler {

struct SyntheticOptions {
  int num_nodes = 100;
  int num_stages = 8;
  int num_regions = 12;
  int mb_per_data_node = 16;
  int path_length = 0;     // 0: half the stages (skip ratio 0.5), min 2
  int memory_slots = 4;
  double forward_s = 0.44;  // mean; each node within +-50%
  uint64_t seed = 1;
};

absl::StatusOr<Scenario> MakeSyntheticScenario(const SyntheticOptions& o);

}  // namespace skipswarm::scheduler

#endif  // SKIPSWARM_SCHEDULER_SYNTHETIC_H_
