// The computes of the stages a node hosts, built from the daemon's options:
// the one recipe of both daemons (NodeDaemon, GossipDaemon), so a new
// compute input is wired once.
//
//   auto runner = std::make_unique<ThreadTaskRunner>();
//   SS_ASSIGN_OR_RETURN(std::unique_ptr<StageCompute> c,
//                       CreateStageCompute(options, stage, runner.get(), clock));
//   std::map<int, StageCompute*> hosted = BorrowComputes(computes);  // node_backend.h
//
// `runner` and `clock` are borrowed: a TorchStageCompute runs its work on
// the runner (join the runner before the computes go), a TimedStageCompute
// times its work on the clock; both must outlive the compute.
//
// Thread rule: pure functions.
#ifndef SKIPSWARM_NODE_DAEMON_STACK_STAGE_COMPUTES_H_
#define SKIPSWARM_NODE_DAEMON_STACK_STAGE_COMPUTES_H_

#include <map>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "node/compute/stage_compute.h"
#include "node/compute/task_runner.h"
#include "node/compute/torch_stage_compute.h"
#include "node/daemon/stack/node_backend.h"  // BorrowComputes
#include "node/daemon/stack/node_daemon_options.h"

namespace skipswarm::node {

// Stage `stage` of the model in o.model (runtime, optimiser; the LR
// schedule spans o.iterations), on libtorch.
// `frozen`: an SDP backward-masking copy (TorchStageCompute::Options::frozen).
absl::StatusOr<std::unique_ptr<TorchStageCompute>> CreateTorchStageCompute(
    const NodeDaemonOptions& o, int stage, TaskRunner* runner, bool frozen = false);

// With o.sdp == kBackward, a frozen copy of every stage not in `hosted`
// (Note [SDP frozen stages]); otherwise none. InvalidArgument when the
// node does not host stage 0 (only data nodes train subnetworks) or runs
// timed compute.
absl::StatusOr<std::map<int, std::unique_ptr<TorchStageCompute>>> CreateFrozenStageComputes(
    const NodeDaemonOptions& o, const std::vector<int>& hosted, TaskRunner* runner);

// A TimedStageCompute when o.wan.timed_forward_s > 0 (forward time divided
// by o.wan.time_scale, dummy payloads of o.wan.timed_payload_bytes), else
// CreateTorchStageCompute. Gossip nodes always get the latter: they refuse
// timed compute (CheckGossipModeOptions) and need a TorchStageCompute's
// state export for joiners and stage moves.
absl::StatusOr<std::unique_ptr<StageCompute>> CreateStageCompute(const NodeDaemonOptions& o,
                                                                 int stage, TaskRunner* runner,
                                                                 common::Clock* clock);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_STACK_STAGE_COMPUTES_H_
