// PlanCache: plans shared by the SchedulerPlanners of data nodes that plan
// from the same input, so that a swarm of them in one process (the
// simulator's nodes backend, sim/node_swarm.h) computes each plan once.
//
//   PlanCache cache([&world] { return world.CostsKey(); }, wall_clock);
//   SchedulerPlannerOptions o = ...;  o.cache = &cache;  o.seed_per_iteration = false;
//   auto planner = SchedulerPlanner::Create(o);          // one per data node
//
// A SchedulerPlanner with a cache looks its input up before it builds the
// TopologyView (O(n^2)) or searches: the key is the members it plans over
// (id, stage, memory slots, in view order), the request (seed, MBs, stages)
// and `costs_key()`, which must change whenever the planner's outside costs
// (PlanningCosts::sec_per_layer_sample_of, hop_s_of) may answer differently.
// Planning is deterministic (seeded, no wall-clock budget), so a hit is the
// plan the planner would have computed: sharing changes wall time only. All
// planners given one cache must have the same options.
//
// Incremental re-planning (SchedulerPlannerOptions::incremental) repairs the
// latest plan of the cache when members only left and costs_key() is the
// same: ReplanForLeavers below.
//
// Thread rule: one caller at a time (the simulator's clock thread).
#ifndef SKIPSWARM_NODE_TRAIN_PLAN_CACHE_H_
#define SKIPSWARM_NODE_TRAIN_PLAN_CACHE_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "node/stage/swarm_view.h"
#include "node/train/route_planner.h"
#include "scheduler/route.h"
#include "scheduler/topology.h"

namespace skipswarm::node {

// One computed plan and what it was computed from.
struct SharedPlan {
  std::vector<PeerInfo> members;  // the TopologyView's nodes, in its order
  scheduler::TopologyView view;
  scheduler::Plan plan;           // view indices
  std::string costs_key;          // PlanCache::costs_key() when computed
  double tolerance = 0;           // the balance tolerance the plan met
  bool balance_relaxed = false;   // a looser one than the options' (Note [Relaxed balance])
  bool incremental = false;       // repaired by ReplanForLeavers
};

class PlanCache {
 public:
  // `costs_key` (see the file comment) is required; `wall_clock` (optional,
  // borrowed, must outlive the cache) times planning for planning_wall_ms.
  explicit PlanCache(std::function<std::string()> costs_key,
                     common::Clock* wall_clock = nullptr);

  std::string costs_key() const { return costs_key_(); }
  const SharedPlan* Find(const std::string& key) const;
  // Stores `plan` under `key` and makes it the latest.
  const SharedPlan* Insert(const std::string& key, SharedPlan plan);
  // The plan inserted last (null before the first).
  const SharedPlan* latest() const { return latest_; }

  // Called by the planners after every Plan(): the routes handed to
  // `input.self` and whether the plan was computed by this call.
  using Listener = std::function<void(const PlanInput& input, int routes,
                                      const SharedPlan& plan, bool fresh)>;
  void SetListener(Listener listener) { listener_ = std::move(listener); }
  void Handed(const PlanInput& input, int routes, const SharedPlan& plan, bool fresh) const {
    if (listener_) listener_(input, routes, plan, fresh);
  }

  common::Clock* wall_clock() const { return wall_clock_; }
  void AddPlanningTime(absl::Duration d) { planning_wall_ms_ += absl::ToDoubleMilliseconds(d); }
  double planning_wall_ms() const { return planning_wall_ms_; }
  // Plans searched (or repaired) so far, failed searches included.
  void CountPlan() { ++plans_computed_; }
  int plans() const { return plans_computed_; }

 private:
  const std::function<std::string()> costs_key_;
  common::Clock* const wall_clock_;
  std::map<std::string, std::unique_ptr<SharedPlan>> plans_;
  const SharedPlan* latest_ = nullptr;
  Listener listener_;
  double planning_wall_ms_ = 0;
  int plans_computed_ = 0;
};

// The plan of `old` repaired for `now_members` (a subset of old.members)
// over `now_view`: the scheduler's ReplanWithoutNode for each departed
// member, then the plan moved to the new view; a route still on a departed
// node is searched again from its origin (RouteSearcher::Best), and routes
// of departed origins go. FailedPrecondition when a member joined (a full
// re-plan is due).
absl::StatusOr<scheduler::Plan> ReplanForLeavers(const SharedPlan& old,
                                                 const std::vector<PeerInfo>& now_members,
                                                 const scheduler::TopologyView& now_view,
                                                 const scheduler::Workload& workload);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_PLAN_CACHE_H_
