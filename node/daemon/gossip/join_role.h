// The live allocator's per-node mode (docs/DESIGN.md §5 "Allocation"): a
// joiner decides from its memory, compute speed and measured bandwidth
// whether it trains a subnetwork on its own data (SDP) or hosts one
// pipeline stage, costing both with the planner's hybrid model
// (scheduler/hybrid_plan.h, Note [Hybrid cost]).
//
//   JoinRoleInputs in;
//   in.model = HybridModelOf(config);      // stages, params, activations, P
//   in.memory_gib = 6;                      // what this node gives training
//   SS_ASSIGN_OR_RETURN(JoinRole r, ChooseJoinRole(view, self, in));
//   if (r.sdp) { /* host r.stages as a subnetwork */ } else { /* r.stages[0] */ }
//
// Note [Join role]: the swarm is the view's live training members, each in
// the role its record says (subnetwork members SDP, the others pipeline
// hosts of their one stage), plus the joiner. Two candidates are costed
// with scheduler::CostRoles: the joiner as a pipeline host of the stage
// ChooseJoinStage picks, and the joiner as an SDP worker; the one with more
// tokens per second wins (ties: pipeline, which keeps the swarm's data
// order unchanged). A candidate the joiner's memory cannot hold
// (FitsSdp / PipelineSlots) is not costed; if neither fits, the error
// names both needs. Bandwidth: a member's uplink is the largest throughput
// any of its measured links shows (a lower bound: pipeline transfers and
// pings measure what one link carried), the joiner's unless `uplink_
// bytes_per_s` is given; a pair's averaging bandwidth is its measured
// link's (unknown: unlimited). Compute: the records' measured speeds
// (kDefaultSecPerLayerSample where unmeasured). The joiner's subnetwork is
// the window of middle stages the swarm's SDP members cover least (cyclic
// windows of P - 2 middle stages, as Note [SDP assignment]; ties: the
// lowest first stage), with stage 0 and the last stage; CostRoles numbers
// SDP windows its own way, which costs the same compute and nearly the
// same averaging.
//
// Thread rule: pure functions.
#ifndef SKIPSWARM_NODE_DAEMON_GOSSIP_JOIN_ROLE_H_
#define SKIPSWARM_NODE_DAEMON_GOSSIP_JOIN_ROLE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/node_id.h"
#include "membership/view.h"
#include "model/averaging_options.h"
#include "scheduler/hybrid_plan.h"
#include "scheduler/route.h"

namespace skipswarm::node {

struct JoinRoleInputs {
  scheduler::HybridModel model;  // shape.num_stages >= 2; sdp_stages: P (0: path_length)
  scheduler::Workload workload;  // micro-batches per data node, route length
  model::AveragingOptions averaging;
  double sec_per_layer_sample = 0;  // the joiner's; <= 0: kDefaultSecPerLayerSample
  double memory_gib = 0;            // the joiner's for training; <= 0: unlimited
  double uplink_bytes_per_s = 0;    // the joiner's; <= 0: from its measured links
  int memory_slots = 4;             // the joiner's MB slots as a pipeline host
  int max_stages = 0;               // > 0: the most stages it can hold (HybridNode)
};

struct JoinRole {
  bool sdp = false;
  // SDP: the subnetwork (stage 0, the middle window, the last stage);
  // pipeline: the one stage.
  std::vector<int> stages;
  // The two candidates' costs (0: that candidate does not fit or cannot
  // train), for the log line.
  double pipeline_tokens_per_s = 0;
  double sdp_tokens_per_s = 0;
  // Why, for the log: the two costs, or why the other role did not fit.
  std::string reason;
};

// FailedPrecondition when neither candidate fits the joiner or the swarm
// cannot take one (ChooseJoinStage's errors); InvalidArgument for a model
// with fewer than 2 stages or params <= 0.
absl::StatusOr<JoinRole> ChooseJoinRole(const membership::View& view, const common::NodeId& self,
                                        const JoinRoleInputs& in);

// The window of Note [Join role]: stage 0, P - 2 middle stages, S - 1.
std::vector<int> LeastCoveredSubnetwork(const membership::View& view, const common::NodeId& self,
                                        int num_stages, int sdp_stages);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_GOSSIP_JOIN_ROLE_H_
