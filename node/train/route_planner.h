// RoutePlanner: how a data node chooses the routes of its micro-batches for
// one iteration, from its current SwarmView (docs/DESIGN.md §5: every data node
// plans its own iteration, deterministically, and the route rides in every
// frame header).
//
//   InOrderPlanner planner;                       // "inorder"
//   SS_ASSIGN_OR_RETURN(auto routes, planner.Plan({.iteration = it,
//                                                  .self = me, .mbs = 4}, view));
//
// InOrderPlanner: every MB visits every stage in order (no skipping); MB j
// of data node d (d = rank of this node among the data nodes) uses replica
// (j + d) mod R of each stage, spreading load over replicas. The daemons'
// default is the scheduler-backed SchedulerPlanner ("skippipe";
// scheduler_planner.h) behind the same interface.
//
// Thread rule: one caller at a time.
#ifndef SKIPSWARM_NODE_TRAIN_ROUTE_PLANNER_H_
#define SKIPSWARM_NODE_TRAIN_ROUTE_PLANNER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "node/stage/stage_server.h"
#include "node/stage/swarm_view.h"

namespace skipswarm::node {

struct PlanInput {
  uint64_t iteration = 0;
  PeerId self;
  int mbs = 1;         // micro-batches this data node injects
  int num_stages = 1;  // S
};

struct PlannedRoute {
  int index = 0;  // 0..k-1 within this data node's iteration (the MB id)
  // Position in the whole iteration's batch over all data nodes when the
  // planner assigns MBs unevenly (Note [Data order]); -1: rank * M + index.
  int data_slot = -1;
  std::vector<RouteHop> hops;
  // The plan's priority (lower = served first on every node; Note [Queue
  // order] in stage_server.h). The driver injects in this order too.
  int priority = 0;
};

class RoutePlanner {
 public:
  virtual ~RoutePlanner() = default;
  virtual std::string name() const = 0;
  // UNAVAILABLE when some stage has no live replica.
  virtual absl::StatusOr<std::vector<PlannedRoute>> Plan(const PlanInput& input,
                                                         const SwarmView& view) = 0;
};

class InOrderPlanner final : public RoutePlanner {
 public:
  std::string name() const override { return "inorder"; }
  absl::StatusOr<std::vector<PlannedRoute>> Plan(const PlanInput& input,
                                                 const SwarmView& view) override;
};

// Note [Unusable records]: a member record the planner cannot use (a stage
// outside 0..num_stages-1, memory_slots outside 1..kMaxMemorySlots) is left
// out of planning, like a dead member, instead of failing every iteration.
// OK when `p` is usable, else why not.
inline constexpr int kMaxMemorySlots = 4096;
absl::Status UsableForPlanning(const PeerInfo& p, int num_stages);

// Rank of `self` among the live data nodes (ascending id), or -1.
int DataNodeRank(const SwarmView& view, const PeerId& self);

// Note [Mixed data order]: the sampler's micro-batches of iteration i are
// i*D*M .. (i+1)*D*M - 1 (Note [Data order]), D = every data node the view
// knows (alive or not, both kinds), M = micro-batches per data node (the
// same on every node). The pipeline data nodes (not subnetwork members)
// take the first P*M: their planner's data slots, or rank*M + j by rank
// among the P. The subnetwork (SDP) data nodes take the rest: worker w's MB
// j is P*M + w*M + j (SdpPlanner, Note [SDP worker order]). So the two
// kinds never read the same micro-batch, and a swarm of one kind orders its
// data as before. (A static --swarm list marks no member: there every data
// node counts as a pipeline one, and SdpPlanner, seeing no marked member,
// numbers all of them as workers from 0.)
struct DataOrder {
  int rank = 0;           // among the data nodes of this node's kind, ascending id
  int num_data = 0;       // D
  int pipeline_data = 0;  // P
};
DataOrder DataOrderOf(const SwarmView& view, const PeerId& self);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_ROUTE_PLANNER_H_
