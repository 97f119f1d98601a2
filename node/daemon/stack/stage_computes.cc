#include "node/daemon/stack/stage_computes.h"

#include "node/compute/timed_stage_compute.h"

namespace skipswarm::node {

absl::StatusOr<std::unique_ptr<TorchStageCompute>> CreateTorchStageCompute(
    const NodeDaemonOptions& o, int stage, TaskRunner* runner) {
  TorchStageCompute::Options co;
  co.model = o.model.model;
  co.stage = stage;
  co.runtime = o.model.runtime;
  co.encode = o.activation_encode;
  co.optimizer = o.model.optimizer;
  co.optimizer.total_steps = o.iterations;
  return TorchStageCompute::Create(co, runner);
}

absl::StatusOr<std::unique_ptr<StageCompute>> CreateStageCompute(const NodeDaemonOptions& o,
                                                                 int stage, TaskRunner* runner,
                                                                 common::Clock* clock) {
  if (o.wan.timed_forward_s <= 0) return CreateTorchStageCompute(o, stage, runner);
  TimedStageCompute::Options to;
  to.stage = stage;
  to.forward = absl::Seconds(o.wan.timed_forward_s / o.wan.time_scale);
  to.payload_bytes = o.wan.timed_payload_bytes;
  return std::make_unique<TimedStageCompute>(clock, to);
}

}  // namespace skipswarm::node
