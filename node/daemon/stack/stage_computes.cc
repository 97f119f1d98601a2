#include "node/daemon/stack/stage_computes.h"

#include <algorithm>

#include "node/compute/timed_stage_compute.h"

namespace skipswarm::node {

absl::StatusOr<std::unique_ptr<TorchStageCompute>> CreateTorchStageCompute(
    const NodeDaemonOptions& o, int stage, TaskRunner* runner, bool frozen) {
  TorchStageCompute::Options co;
  co.model = o.model.model;
  co.stage = stage;
  co.runtime = o.model.runtime;
  co.encode = o.activation_encode;
  co.optimizer = o.model.optimizer;
  co.optimizer.total_steps = o.iterations;
  co.frozen = frozen;
  co.averaging = o.model.averaging;
  return TorchStageCompute::Create(co, runner);
}

absl::StatusOr<std::map<int, std::unique_ptr<TorchStageCompute>>> CreateFrozenStageComputes(
    const NodeDaemonOptions& o, const std::vector<int>& hosted, TaskRunner* runner) {
  std::map<int, std::unique_ptr<TorchStageCompute>> frozen;
  if (o.sdp != model::SdpMode::kBackward) return frozen;
  if (std::find(hosted.begin(), hosted.end(), 0) == hosted.end()) {
    return absl::InvalidArgumentError(
        "--sdp=backward: a node training a subnetwork hosts stage 0 (it is a data node)");
  }
  if (o.wan.timed_forward_s > 0) {
    return absl::InvalidArgumentError("--sdp=backward needs libtorch compute, not timed compute");
  }
  for (int s = 1; s < o.model.model.num_stages; ++s) {
    if (std::find(hosted.begin(), hosted.end(), s) != hosted.end()) continue;
    absl::StatusOr<std::unique_ptr<TorchStageCompute>> c =
        CreateTorchStageCompute(o, s, runner, /*frozen=*/true);
    if (!c.ok()) return c.status();
    frozen[s] = *std::move(c);
  }
  return frozen;
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
