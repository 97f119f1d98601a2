// Cost model and discrete-event iteration evaluator (docs/DESIGN.md §5).
//
// Cost model. Forward of one MB on node v: c_v = t_v x layers x samples
// (TopologyView::forward_s). Backward: 1.5 c_v. Loss + head at the origin:
// 0.25 c_o. A hop u->v: d(u,v) = TopologyView::hop_s, the same both ways.
// Contention-free latency of a route (RouteLatency, route_search.h):
//   sum_v 2.5 c_v + 0.25 c_o + 2 sum d(edges of the cycle).
//
// Simulation. A route o,v1..v_{P-1},o becomes 2P+1 tasks in a chain:
//   F(o) F(v1) .. F(v_{P-1}) | Loss(o) | B(v_{P-1}) .. B(v1) B(o)
// with the hop time between consecutive tasks on different nodes. Each node
// is one non-preemptive server. A forward may start on v only while v has a
// free memory slot; the slot is taken when the forward starts and freed
// when the same MB's backward on v ends. A free node picks among its ready
// tasks by (route priority, backward/loss before forward, earliest ready,
// mb id). The first task is ready at the route's release_s. Iteration time
// = the moment the last B(o) ends. Links do not contend unless
// `link_contention` is on: then each directed link carries one MB at a
// time, first come first served, and is busy for the whole hop time (the
// view does not split latency from transfer time, so this is pessimistic).
// A plan whose MBs wait on each other's memory slots in a cycle deadlocks:
// the result then has `deadlocked` set and iteration time +infinity.
//
// Example (tests: evaluator_test.cc "OneRoute"): view with c = 1 s on every
// node and every hop 0.5 s; one route o,a,o: F(o) 0..1, hop, F(a) 1.5..2.5,
// hop, Loss(o) 3..3.25, hop, B(a) 3.75..5.25, hop, B(o) 5.75..7.25.
// RouteLatency = 2.5 + 2.5 + 0.25 + 2 x (0.5 + 0.5) = 7.25.
//
// Thread rule: pure functions.
#ifndef SKIPSWARM_SCHEDULER_EVALUATOR_H_
#define SKIPSWARM_SCHEDULER_EVALUATOR_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "scheduler/route.h"
#include "scheduler/topology.h"

namespace skipswarm::scheduler {

struct Evaluation {
  double iteration_time_s = 0;
  bool deadlocked = false;
  std::vector<double> node_busy_s;       // per node index
  std::vector<double> node_utilisation;  // busy / iteration time
  std::vector<int> stage_visits;         // StageVisits(view, plan)
  std::vector<double> route_finish_s;    // per plan.routes index
  std::vector<double> origin_finish_s;   // per node index (0 if not origin)
};

// Simulates one iteration of `plan`. Fails (InvalidArgument) only on
// structurally broken routes (bad indices, origin not first and last); it
// does not enforce the route rules (use ValidatePlan for that).
absl::StatusOr<Evaluation> Evaluate(const TopologyView& view,
                                    const Plan& plan,
                                    bool link_contention = false);

// Fast variant for planners' inner loops: REQUIRES structurally valid
// routes. Returns iteration time (+inf on deadlock) and, when non-null,
// fills `route_finish_s`.
double EvaluateTime(const TopologyView& view, const Plan& plan,
                    std::vector<double>* route_finish_s);

// EvaluateTime with buffers kept between runs, for planners' inner loops.
// Thread rule: one thread at a time per object.
struct SimEvent {
  double time;
  int32_t seq;
  int32_t route;
  int32_t task;  // the node is TaskNode(route, task)
  bool done;     // true: the task finished; false: it arrived (is ready)
};
class IterationSimulator {
 public:
  IterationSimulator();
  ~IterationSimulator();
  // REQUIRES: structurally valid routes. Returns the iteration time, +inf
  // on deadlock.
  double Run(const TopologyView& view, const Plan& plan,
             std::vector<double>* route_finish_s,
             std::vector<double>* node_busy_s = nullptr,
             bool* deadlocked = nullptr, bool link_contention = false);

 private:
  struct NodeState;
  std::vector<NodeState> nodes_;
  std::vector<SimEvent> events_;
  std::vector<int> touched_;
  std::vector<char> is_touched_;
  absl::flat_hash_map<int64_t, double> link_free_;  // contention mode
};

// Plan-independent lower bound for the workload on this view: the maximum of
//  (a) each origin's own work, M x 2.75 c_o;
//  (b) each origin's ceil(M / m) x L (m = its memory slots, L = its
//      fastest valid route latency): an MB holds an origin slot >= L;
//  (c) all non-origin work spread perfectly over the non-origin nodes:
//      (#data nodes x M x (P-1)) / sum_v 1/(2.5 c_v);
//  (d) each origin's serial tail when M > m: no backward can start at the
//      origin before t0 = L - 1.5 c_o; the last MB to be injected needs
//      M - m slot releases (backwards, 1.5 c_o each) and follows the other
//      M - m - 1 late forwards (c_o each), all on the origin after t0, then
//      takes >= L: t0 + (M-m) 1.5 c_o + (M-m-1) c_o + L.
//      (Reference file: 2 x 15.142 + 5 x 0.44 = 32.484 s.)
struct LowerBound {
  double seconds = 0;
  double origin_work_s = 0;    // (a)
  double origin_memory_s = 0;  // (b)
  double spread_work_s = 0;    // (c)
  double origin_tail_s = 0;    // (d)
  std::vector<double> fastest_route_s;  // per data node, data_nodes() order
};
absl::StatusOr<LowerBound> ComputeLowerBound(const TopologyView& view,
                                             const Workload& workload);

}  // namespace skipswarm::scheduler

#endif  // SKIPSWARM_SCHEDULER_EVALUATOR_H_
