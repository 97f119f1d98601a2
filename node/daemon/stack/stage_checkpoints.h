// Per-stage checkpoints of a node's hosted computes: one file per stage in
// model.checkpoint_dir, named after the node (`NAME-stage-S.ckpt`). The one
// recipe of both daemons (NodeDaemon, GossipDaemon's founders).
//
//   SS_ASSIGN_OR_RETURN(int64_t first, ResumeFromStageCheckpoints(o, hosted));
//   ...train iterations [first, o.iterations)...
//   SS_RETURN_IF_ERROR(SaveStageCheckpoints(o, hosted));
//
// A save writes the stages as one set (Note [Stage set commit],
// stage_set_commit.h): a crash at any moment leaves the old set or the new
// one, which the next start finishes or undoes before loading.
//
// Resume rule: a node resumes only when every hosted stage has a
// checkpoint and all are at the same step (all nodes checkpoint together,
// so they then resume at the same iteration).
//
// Thread rule: call while the computes are idle (before training starts,
// at an iteration boundary or after it ends).
#ifndef SKIPSWARM_NODE_DAEMON_STACK_STAGE_CHECKPOINTS_H_
#define SKIPSWARM_NODE_DAEMON_STACK_STAGE_CHECKPOINTS_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "node/compute/stage_compute.h"
#include "node/daemon/stack/node_daemon_options.h"

namespace skipswarm::node {

std::string StageCheckpointPath(const NodeDaemonOptions& o, int stage);

// Saves every stage in `stages` (creating the folder); OK and nothing
// written when o.model.checkpoint_dir is empty.
absl::Status SaveStageCheckpoints(const NodeDaemonOptions& o,
                                  const std::map<int, StageCompute*>& stages);

// Loads the stages' checkpoints that exist and returns the iteration to
// start at: their common step, or 0 when there are none (or no
// checkpoint_dir). Logs "NAME: resumed at iteration N" when it resumes.
// FailedPrecondition when some stages have none or the steps disagree;
// the computes' load errors otherwise.
absl::StatusOr<int64_t> ResumeFromStageCheckpoints(const NodeDaemonOptions& o,
                                                   const std::map<int, StageCompute*>& stages);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_STACK_STAGE_CHECKPOINTS_H_
