// Runs one training iteration of a plan on the simulated clock while nodes
// die, slow down or become unreachable, re-routing the micro-batches that
// hit a failure.
//
// Without failures it is the scheduler's discrete-event evaluator
// (scheduler/evaluator.h) step for step: same servers, memory slots, task
// order and hop costs, so the two give the same iteration time (a test
// checks it). It is a separate loop because the evaluator is a pure
// function with no way to inject failures mid-iteration. sim/node_swarm.h
// runs the real stage server + data-node driver instead, with fewer kinds
// of churn (see sim/README.md, "What runs real code", for how they agree).
//
// Failures (Note [Failure handling in the simulator]):
//  * A node dies at time t (the world says so through WorldHooks and the
//    driver calls OnNodeDeath from a clock timer).
//  * An MB whose next forward hop is on its way to the dead node (or is
//    sent there later) is re-routed by the node that holds its activations,
//    the previous node of its route, once that node notices: after
//    stream_timeout_s, or at once if gossip already declared the node dead.
//    The rest of the route comes from node/'s SchedulerRouteRepairer, the
//    daemons' and the nodes backend's (the scheduler's RerouteInFlight:
//    another replica, a better completion, or a skip), over what the holder
//    knows: the plan's members less gossip's verdicts, hop costs as
//    planned, kNoLink across a partition. No answer: the MB is dropped.
//    Only an MB still on its way to the dead node is re-routed: one the
//    dead node had admitted (arrived there, queued or running) is dropped,
//    as a stage server drops it (Note [Lost with a neighbour] in
//    node/stage/stage_server.cc).
//  * An MB that keeps activations on the dead node (forward done there,
//    backward not), or whose origin died, is dropped: its backward cannot
//    be computed. Its memory slots are freed when the loss is noticed.
//  * A hop over a cut link (partition) fails like a hop to a dead node.
//  * Re-route time = detection -> the new route is chosen and the
//    activation sent again (reroute_compute_s later); it then arrives at
//    the replacement one hop later ("resume").
//
//   IterationExecutor exec(view, workload, &clock, &world, options);
//   IterationResult r = exec.Run(plan);   // advances the clock to its end
//
// Thread rule: single-threaded; the clock's timers fire inside Run on the
// calling thread. `view`, `clock` and `world` must outlive the executor.
#ifndef SKIPSWARM_SIM_EXECUTOR_H_
#define SKIPSWARM_SIM_EXECUTOR_H_

#include <memory>
#include <optional>
#include <queue>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/node_id.h"
#include "common/sim_clock.h"
#include "node/train/scheduler_repairer.h"
#include "scheduler/route.h"
#include "scheduler/topology.h"

namespace skipswarm::sim {

// The executor's window on the simulated world, in view indices. Times are
// clock seconds (SteadyNow).
class WorldHooks {
 public:
  virtual ~WorldHooks() = default;
  // When the node died; +infinity while alive.
  virtual double DeathTime(int v) = 0;
  // When every member's gossip view said "dead"; +infinity if not yet.
  virtual double GossipDeadTime(int v) = 0;
  virtual bool LinkUp(int u, int v) = 0;
  // Multiplies the node's compute time right now (stragglers).
  virtual double SpeedFactor(int v) = 0;
};

struct ExecutorOptions {
  double stream_timeout_s = 0.5;
  // Simulated time the holder spends choosing the new route (the
  // scheduler's BestCompletion; its benchmark bounds it at 1 ms).
  double reroute_compute_s = 0.001;
  // false: a failed hop drops the MB (a full-pipeline system without
  // re-routing).
  bool reroute = true;
  // The iteration's index: the repairer's tie-break (as on a node).
  uint64_t iteration = 0;
};

struct RerouteRecord {
  int mb = 0;
  int failed_node = 0;      // view index
  double failed_at_s = 0;   // when this MB met the failure: the death, or
                            // a later send to the dead/unreachable node
  double detected_s = 0;    // when the holder noticed
  double sent_s = 0;        // new route chosen, activation sent again
  double resumed_s = 0;     // activation at the replacement (dropped: -1)
  bool dropped = false;
};

struct IterationResult {
  double start_s = 0;
  double end_s = 0;
  int mbs = 0;
  int completed = 0;
  int dropped = 0;
  int rerouted = 0;  // MBs re-routed at least once (and not dropped)
  bool deadlocked = false;
  std::vector<double> node_busy_s;  // per view node, useful work only
  std::vector<int> stage_visits;    // of completed MBs, per stage
  std::vector<RerouteRecord> events;
};

class IterationExecutor {
 public:
  IterationExecutor(const scheduler::TopologyView& view,
                    const scheduler::Workload& workload,
                    common::SimClock* clock, WorldHooks* world,
                    ExecutorOptions options);
  ~IterationExecutor();

  // Runs `plan` (view indices; structurally valid) starting now. Returns
  // once every MB finished or was dropped.
  IterationResult Run(const scheduler::Plan& plan);

  // Tells a running iteration that view node `v` just died.
  void OnNodeDeath(int v);

 private:
  struct Mb;
  struct Event;
  struct EventLater {
    bool operator()(const Event& a, const Event& b) const;
  };
  struct Ready;
  struct NodeState;

  double Now();
  void Push(Event e);
  void SendHop(int m, int task, int from, double now);
  void Fail(int m, int task, int from, int to, double failed_at, double detect);
  void OnDetect(const Event& e, double now);
  void Resume(const Event& e, double now, const std::vector<int>& nodes);
  void Drop(int m, double now, int failed_node, double failed_at);
  void TryStart(int v, double now);
  void Finish(int m, double now);

  const scheduler::TopologyView& view_;
  scheduler::Workload workload_;
  common::SimClock* clock_;
  WorldHooks* world_;
  ExecutorOptions options_;
  absl::flat_hash_map<common::NodeId, int> index_;  // view index by id
  std::unique_ptr<node::SchedulerRouteRepairer> repairer_;

  // Per-run state.
  std::vector<Mb> mbs_;
  std::vector<NodeState> nodes_;
  std::vector<Event> heap_;
  long seq_ = 0;
  int open_ = 0;  // MBs neither finished nor dropped
  bool running_ = false;
  IterationResult result_;
  std::vector<int> touched_;
};

}  // namespace skipswarm::sim

#endif  // SKIPSWARM_SIM_EXECUTOR_H_
