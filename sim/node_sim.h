// The nodes backend's simulation (sim/node_swarm.h), shared by its two
// source files: node_swarm.cc (nodes, iterations, the report) and
// node_churn.cc (crashes, revivals, joins, stragglers, partitions, SWIM
// verdicts). Internal: include it from those two only.
//
// Thread rule: single-threaded (the SimClock's thread).
#ifndef SKIPSWARM_SIM_NODE_SIM_H_
#define SKIPSWARM_SIM_NODE_SIM_H_

#include <map>
#include <memory>
#include <set>
#include <tuple>

#include "common/random.h"
#include "common/sim_clock.h"
#include "node/compute/timed_stage_compute.h"
#include "node/stage/stage_server.h"
#include "node/train/data_node_driver.h"
#include "node/train/node_stack.h"
#include "node/train/data_source.h"
#include "node/train/inproc_group.h"
#include "node/train/node_trainer.h"
#include "node/train/plan_cache.h"
#include "node/train/scheduler_planner.h"
#include "node/train/scheduler_repairer.h"
#include "node/transport/inproc_transport.h"
#include "node/transport/shaping_transport.h"
#include "sim/detector.h"
#include "sim/node_planning.h"
#include "sim/node_world.h"
#include "sim/node_swarm.h"
#include "sim/swim_gossip.h"

namespace skipswarm::sim::internal {

using MbKey = std::tuple<int, uint64_t, uint64_t>;  // origin, iteration, mb

// SWIM: a crash that is not out of every view this long after it is taken
// out of the replica hub anyway (and logged), so averaging cannot hang.
inline constexpr double kSwimVerdictLimitS = 60;
// A run with no report, no finished MB and no churn for this long has hung
// (with SWIM the clock always has gossip timers, so "no event left" cannot
// tell).
inline constexpr double kHungAfterS = 3600;

class NodeSim;

// Passes the repairer's answers to the simulation's log.
class LoggedRepairer final : public node::RouteRepairer {
 public:
  LoggedRepairer(std::unique_ptr<node::RouteRepairer> inner, NodeSim* sim, int holder)
      : inner_(std::move(inner)), sim_(sim), holder_(holder) {}
  absl::StatusOr<std::vector<node::RouteHop>> Repair(const node::RepairRequest& r,
                                                     const node::SwarmView& view) override;

 private:
  std::unique_ptr<node::RouteRepairer> inner_;
  NodeSim* sim_;
  int holder_;
};

// The data node's OriginListener, seen by the simulation on the way.
class OriginTap final : public node::OriginListener {
 public:
  OriginTap(node::OriginListener* driver, NodeSim* sim, int origin)
      : driver_(driver), sim_(sim), origin_(origin) {}
  void OnTail(uint64_t iteration, uint64_t mb, double loss) override {
    driver_->OnTail(iteration, mb, loss);
  }
  void OnFinished(uint64_t iteration, uint64_t mb, const absl::Status& status) override;

 private:
  node::OriginListener* driver_;
  NodeSim* sim_;
  int origin_;
};

struct SimNode {
  // Kept after a crash: timers of its tasks may still run.
  std::unique_ptr<WorldCompute> compute;
  std::unique_ptr<WorldSwarmView> view;
  std::unique_ptr<node::Transport> transport;
  std::unique_ptr<node::RouteRepairer> repairer;
  std::unique_ptr<node::NodeStack> stack;  // node/'s recipe; null once crashed
  bool done = false;
  double member_since = 0;
};

struct IterationBook {
  bool planned = false;
  double end = 0;
  int mbs = 0;
  int completed = 0;
  int rerouted = 0;
  int attributed_drops = 0;
  int members = 0;
  double planned_s = 0;
  bool replanned = false;
};

class NodeSim {
 public:
  NodeSim(const SimScenario& sc, const SimOptions& opts)
      : sc_(sc),
        opts_(opts),
        uni_(sc.universe.view),
        world_(&clock_, &sc.universe.view, sc.detector.stream_timeout_s),
        plans_(WorldCostsKey(&world_), opts.wall_clock),
        victims_(common::Random(sc.seed).Fork("victims")),
        detect_rng_(common::Random(sc.seed).Fork("detector")) {}

  absl::StatusOr<SimReport> Run();

  void OnRepair(int holder, const node::RepairRequest& r, const std::vector<node::RouteHop>& fixed);
  void OnVerdict(int observer, int subject, proto::MemberState state);
  void OnFinished(int origin, uint64_t iteration, uint64_t mb, const absl::Status& status);

 private:
  double Now() const { return world_.now(); }
  int AliveMembers() const;
  absl::Status StartNode(int u, uint64_t first);
  void TearDown(int u);
  void Kill(int u, const std::string& cause);
  void Revive(int u, double ready_at, const std::string& kind);
  int AutoStage(int joiner) const;
  void Apply(const ChurnEvent& e);
  void OnReport(int u, const node::NodeIterationReport& r);
  void OnHandout(const node::PlanInput& input, int routes, const node::SharedPlan& plan,
                 bool fresh);
  int FailureFor(double t, const std::string& message) const;
  // SWIM: whether every running node but `victim` has it out of its view;
  // then the failure's gossip_detect_s is set and the hub drops it.
  void CheckAllSee(int victim);
  IterationBook& Book(uint64_t i) {
    if (i >= books_.size()) books_.resize(i + 1);
    return books_[i];
  }

  const SimScenario& sc_;
  const SimOptions& opts_;
  const scheduler::TopologyView& uni_;
  common::SimClock clock_;
  NodeWorld world_;
  // The data nodes' planners share their plans (sim/node_planning.h).
  node::PlanCache plans_;
  std::map<const node::SharedPlan*, double> planned_s_;  // the evaluator's time
  common::Random victims_;
  common::Random detect_rng_;
  std::unique_ptr<node::Switchboard> board_net_;
  std::unique_ptr<node::InProcessGroupHub> hub_;
  node::SyntheticDataSource data_{2, 8, 32};
  std::vector<std::unique_ptr<SimNode>> nodes_;       // per universe node
  std::vector<std::unique_ptr<SimNode>> graveyard_;   // crashed incarnations
  std::vector<double> busy_s_;                        // over incarnations
  std::vector<double> member_s_;
  std::vector<int> waiting_;  // revived, to start at the next boundary
  std::vector<IterationBook> books_;
  std::map<int, int> last_failure_;  // universe node -> report_.failures
  std::set<MbKey> repaired_;
  int iterations_ = 0;
  uint64_t next_iteration_ = 0;  // the first iteration not yet reported
  double last_progress_ = 0;     // simulated time of the last report or MB
  SimReport report_;
  // Real SWIM detection (SimOptions::detection); null: the detector model.
  // Declared after world_ and the clock: destroyed before them.
  std::unique_ptr<SwimGossip> swim_;
  // SWIM: crashed nodes not yet out of every view -> their failure record.
  std::map<int, int> pending_;
};

}  // namespace skipswarm::sim::internal

#endif  // SKIPSWARM_SIM_NODE_SIM_H_
