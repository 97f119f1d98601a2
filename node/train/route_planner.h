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
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
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
  // The planner's prediction of this MB's round trip (injection -> its
  // backward done at this node, queueing included), from the view's
  // measured links and compute; nullopt when the planner cannot predict.
  // A claim built from peers' measurements, not a bound: the driver caps
  // what it takes from it (Note [MB deadline] in data_node_driver.h).
  std::optional<absl::Duration> predicted_round_trip;
};

class RoutePlanner {
 public:
  virtual ~RoutePlanner() = default;
  virtual std::string name() const = 0;
  // UNAVAILABLE when some stage has no live replica.
  virtual absl::StatusOr<std::vector<PlannedRoute>> Plan(const PlanInput& input,
                                                         const SwarmView& view) = 0;
};

// Note [Unusable records]: a member record the planner cannot use (a stage
// outside 0..num_stages-1, memory_slots outside 1..kMaxMemorySlots) is left
// out of planning, like a dead member, instead of failing every iteration.
// OK when `p` is usable, else why not.
inline constexpr int kMaxMemorySlots = 4096;
absl::Status UsableForPlanning(const PeerInfo& p, int num_stages);

// Note [Planning members]: what every planner (SchedulerPlanner,
// InOrderPlanner, SdpPlanner) plans over is PlanningMembers: the view's
// members that it calls alive and whose records are usable (Note [Unusable
// records]). A SwarmView lists every member it knows, alive or not, and
// gossip keeps a DEAD or LEFT member's record as a tombstone for
// MembershipOptions::dead_retention (25 h); that record must not reach a
// plan. The rule:
//   - a member is out of the planner's input from the first view that does
//     not call it alive: gossip's DEAD verdict (in every member's view a
//     few seconds after the crash with the default options: probes,
//     then the suspicion timeout) or a local verdict (MarkDead); it is not
//     even checked for usability after that;
//   - it comes back only when the view calls it alive again, which for
//     gossip takes a newer record from it (a higher incarnation: a
//     restart under the same key, or its refutation of a false verdict);
//     the tombstone itself never does, for all of dead_retention;
//   - an unusable record of a live member is refused, not retried: it is
//     counted and logged once per record version (id, incarnation), so a
//     re-signed record that is still unusable is logged once more.
// The in-flight repairer (SchedulerRouteRepairer) refuses unusable records
// the same way; it keeps dead members with usable records only to name the
// failed hop and as a stage's placeholder, removed from its topology and
// never chosen (CheckRepair).
//
// RefusedRecords: the refusals of one planner or repairer. Thread-safe (a
// repairer is called from several threads). Memory: one entry per member
// id refused, at most kMaxRememberedRefusals (then it starts afresh, at
// worst logging a record once more).
class RefusedRecords {
 public:
  static constexpr size_t kMaxRememberedRefusals = 4096;
  // Records that `p`'s record (at `incarnation`; nullopt where the view
  // holds no record versions) is refused for `why`; counts and logs it the
  // first time this version is refused.
  void Refuse(const PeerInfo& p, std::optional<uint64_t> incarnation, const absl::Status& why);
  // Distinct record versions refused so far.
  uint64_t count() const;

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<common::NodeId, std::optional<uint64_t>> refused_ ABSL_GUARDED_BY(mu_);
  uint64_t count_ ABSL_GUARDED_BY(mu_) = 0;
};

// The members of `view` a planner may use for `num_stages` stages (Note
// [Planning members]), ascending id; refusals go to `refused` (may be null).
std::vector<PeerInfo> PlanningMembers(const SwarmView& view, int num_stages,
                                      RefusedRecords* refused);

class InOrderPlanner final : public RoutePlanner {
 public:
  std::string name() const override { return "inorder"; }
  absl::StatusOr<std::vector<PlannedRoute>> Plan(const PlanInput& input,
                                                 const SwarmView& view) override;

 private:
  RefusedRecords refused_;  // Note [Planning members]
};

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
