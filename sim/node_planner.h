// The scheduler behind the real-node backend's data nodes (sim/node_swarm.h):
// a node::RoutePlanner per data node over one PlanBoard they share.
//
// Each data node plans, at the start of every iteration, from its own
// node::SwarmView (the members it believes alive: the failure detector's
// verdicts plus its own) with the scheduler's planner on the scenario's true
// costs (compute x the straggler factor the world says was measured, hop
// times, cut links missing), exactly as sim/driver.h plans, and injects the
// routes of that plan whose origin it is. The plan is computed once per
// distinct view (the board caches it: data nodes that agree on the members
// compute the same plan, seeded and without a wall-clock budget, so sharing
// changes nothing but the wall time). A depleted swarm whose plan cannot meet
// the balance rule is planned with a looser one, as sim/driver.h does. With
// SimOptions::replan "incremental", a view that only lost members keeps the
// last plan, repaired by the scheduler's ReplanWithoutNode.
//
//   PlanBoard board(&scenario, &world, options, planner_name);
//   BoardRoutePlanner planner(&board);       // one per data node
//   ... DataNodeDriver(..., &planner, ...) ...
//
// Thread rule: single-threaded (the SimClock's thread).
#ifndef SKIPSWARM_SIM_NODE_PLANNER_H_
#define SKIPSWARM_SIM_NODE_PLANNER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "node/train/route_planner.h"
#include "scheduler/planner.h"
#include "sim/driver.h"
#include "sim/node_world.h"
#include "sim/scenario.h"

namespace skipswarm::sim {

struct BoardPlan {
  std::vector<int> members;  // universe indices, ascending (view order)
  scheduler::TopologyView view;
  scheduler::Plan plan;      // view indices
  double planned_s = 0;      // the evaluator's time for the plan
  bool balance_relaxed = false;
  double tolerance = 0;
};

class PlanBoard {
 public:
  PlanBoard(const SimScenario* scenario, NodeWorld* world, const SimOptions& options,
            std::string planner);

  // The plan for these live members (universe indices, ascending) under the
  // world's current speeds and partitions. `fresh` is set when it was
  // computed now.
  absl::StatusOr<const BoardPlan*> PlanFor(const std::vector<int>& members, bool* fresh);

  // Called with every route set handed to a data node.
  using Handout = std::function<void(uint64_t iteration, int origin, int routes,
                                     const BoardPlan& plan, bool fresh)>;
  void SetHandout(Handout h) { handout_ = std::move(h); }
  void Handed(uint64_t iteration, int origin, int routes, const BoardPlan& plan, bool fresh) {
    if (handout_) handout_(iteration, origin, routes, plan, fresh);
  }

  // The plan computed last (null before the first).
  const BoardPlan* latest() const { return last_; }
  double planning_wall_ms() const { return planning_wall_ms_; }
  int plans() const { return plans_; }
  const std::string& planner_name() const { return planner_name_; }
  const scheduler::TopologyView& universe() const { return sc_->universe.view; }
  const NodeWorld& world() const { return *world_; }

 private:
  // `conditions`: the speeds and partitions the plan is for.
  absl::StatusOr<BoardPlan> Compute(const std::vector<int>& members, const std::string& conditions);
  absl::StatusOr<scheduler::Plan> Incremental(const BoardPlan& old, const BoardPlan& now) const;

  const SimScenario* sc_;
  NodeWorld* world_;
  const SimOptions options_;
  const std::string planner_name_;
  std::unique_ptr<scheduler::Planner> planner_;
  std::map<std::string, std::unique_ptr<BoardPlan>> cache_;
  const BoardPlan* last_ = nullptr;  // the latest computed, for "incremental"
  std::string last_conditions_;
  Handout handout_;
  double planning_wall_ms_ = 0;
  int plans_ = 0;
};

class BoardRoutePlanner final : public node::RoutePlanner {
 public:
  explicit BoardRoutePlanner(PlanBoard* board) : board_(board) {}
  std::string name() const override { return board_->planner_name(); }
  absl::StatusOr<std::vector<node::PlannedRoute>> Plan(const node::PlanInput& input,
                                                       const node::SwarmView& view) override;

 private:
  PlanBoard* const board_;
};

}  // namespace skipswarm::sim

#endif  // SKIPSWARM_SIM_NODE_PLANNER_H_
