// What a joiner decides from its membership View before it trains
// (docs/DESIGN.md §5 "Allocation"): which stage to host (the scheduler's
// allocation: the stage whose capacity its speed raises most, weakest
// first), and which live replicas to fetch that stage's state from.
//
//   SS_ASSIGN_OR_RETURN(int stage, ChooseJoinStage(view, self, shape, my_speed));
//   std::vector<StateSource> from = StateSources(view, self, stage);
//
// Thread rule: pure functions.
#ifndef SKIPSWARM_NODE_DAEMON_GOSSIP_JOIN_PLANNING_H_
#define SKIPSWARM_NODE_DAEMON_GOSSIP_JOIN_PLANNING_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "membership/view.h"
#include "node/daemon/gossip/state_transfer.h"
#include "scheduler/topology.h"

namespace skipswarm::node {

// Speed assumed for a member that has not measured itself yet.
inline constexpr double kDefaultSecPerLayerSample = 1e-3;

// The stage `self` should host: a non-zero one, or stage 0 (a data node
// with its own data shard) when `allow_data_stage` and the data nodes are
// clearly the bottleneck (scheduler::JoinChoiceOptions). Every live
// training member of `view` must host exactly one stage (FailedPrecondition
// otherwise); `model.num_stages` >= 2. Speeds come from the members'
// records (their measured speeds, speed_reports.h; kDefaultSecPerLayerSample
// where unmeasured); hops from the view's smoothed RTTs (1 ms where
// unmeasured). Paused members (Note [Paused members] in
// training_members.h) are no capacity: a stage hosted by paused members
// only is chosen first (the lowest such stage).
absl::StatusOr<int> ChooseJoinStage(const membership::View& view, const common::NodeId& self,
                                    const scheduler::ModelShape& model,
                                    double sec_per_layer_sample, bool allow_data_stage = false);

// Note [Stage rebalancing] (scheduler/allocation.h) seen from one member:
// the move `self` should make now (from its stage to `to`), or nullopt when
// the rule picks nobody, picks another member, or a member is still
// entering or moving (record iteration > `iteration`, or its record says
// `entering`: Note [Routed once ready] in training_members.h). Speeds come
// from the records as for ChooseJoinStage; paused members (Note [Paused
// members] in training_members.h) are left out of the rule's swarm.
struct OwnMove {
  int from = -1;
  int to = -1;
  double gain = 1;  // bottleneck throughput after / before
};
absl::StatusOr<std::optional<OwnMove>> ChooseOwnMove(const membership::View& view,
                                                     const common::NodeId& self,
                                                     const scheduler::ModelShape& model,
                                                     uint64_t iteration, double min_gain);

// State addresses (Note [Daemon records]) and ids of the live members
// hosting `stage` with their state loaded (not entering: neither a joiner
// nor a mover to `stage` still fetching it, Note [Routed once ready] in
// training_members.h), founders first, then by id: the order a joiner
// tries them.
std::vector<StateSource> StateSources(const membership::View& view, const common::NodeId& self,
                                      int stage);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_GOSSIP_JOIN_PLANNING_H_
