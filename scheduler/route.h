// Routes, plans, the workload of one iteration, and the route rules.
//
// Note [Route invariants]
// A route is the cycle of one micro-batch: nodes = {o, v1, ..., v_{P-1}, o}
// where o is a data node (stage 0, the MB's origin) and v1..v_{P-1} host
// P-1 distinct non-zero stages. The backward pass retraces it. Rules
// (ValidateRoute), with s_i = stage(v_i):
//  * swaps: an inversion is a pair i<j with s_i > s_j. Every inversion must
//    be between adjacent stage numbers (s_i == s_j + 1) and there are at most
//    `max_swaps` of them. Hence a swap exchanges two consecutive stages that
//    sit next to each other in the route: 1,3,2 and 4,3,5 are fine, 3,2,1 is
//    not (3 before 1).
//  * jumps: every forward step s_i -> s_{i+1} with s_{i+1} > s_i (and the
//    first step from stage 0) advances at most `max_jump` stages.
//  * a node hosts at most memory_slots MBs between their forward and
//    backward; the evaluator gates on it, planners need not encode it.
//  * balance (ValidatePlan): every non-zero stage gets
//    visits within [mean*(1-tol), mean*(1+tol)] rounded outwards to whole
//    visits, mean = (#MBs x (P-1)) / (S-1).
// `priority` (lower = served first on every node) and `release_s` (earliest
// injection) are honoured by the evaluator (evaluator.h).
//
// Thread rule: plain values.
#ifndef SKIPSWARM_SCHEDULER_ROUTE_H_
#define SKIPSWARM_SCHEDULER_ROUTE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "scheduler/topology.h"

namespace skipswarm::scheduler {

struct Route {
  int mb = 0;              // unique id within the plan
  int origin = 0;          // data node index == nodes.front() == nodes.back()
  std::vector<int> nodes;  // the whole cycle, origin first and last
  int priority = 0;        // lower is served first on every node
  double release_s = 0;    // earliest time its forward may start at origin
};

struct Plan {
  std::string planner;  // who made it
  std::vector<Route> routes;
};

// What one iteration asks for and the rules its routes obey.
struct Workload {
  int mb_per_data_node = 6;   // M
  int path_length = 4;        // P: nodes per route counting the origin once
  int max_swaps = 2;
  int max_jump = 4;
  double balance_tolerance = 0.10;  // +- fraction of the mean stage visits
};

// Checks a workload against a view: 2 <= P <= S, M >= 1, tolerance >= 0.
absl::Status ValidateWorkload(const TopologyView& view, const Workload& w);

// Structural and rule check of one route (Note [Route invariants]); does
// not look at balance. `path_length` < 0 accepts any length (replay).
absl::Status ValidateRoute(const TopologyView& view, const Workload& w,
                           const Route& route, int path_length);

// Visits per stage (index 0 counts MBs, i.e. origin visits).
std::vector<int> StageVisits(const TopologyView& view, const Plan& plan);

// Allowed [min, max] visits per non-zero stage for `total_visits`.
struct VisitRange {
  int min = 0;
  int max = 0;
};
VisitRange BalanceRange(const TopologyView& view, const Workload& w,
                        int total_visits);

// Every route valid (`path_length` < 0: any length), mb ids unique, and
// stage visits within BalanceRange. Errors name the first offending route.
absl::Status ValidatePlan(const TopologyView& view, const Workload& w,
                          const Plan& plan, int path_length);

// Stage sequence of a route (without the origin's stage 0).
std::vector<int> RouteStages(const TopologyView& view, const Route& route);

// True iff `stages` (non-zero, distinct) obey the swap and jump rules.
bool StagesObeyRules(const std::vector<int>& stages, int max_swaps,
                     int max_jump);

std::string RouteToString(const TopologyView& view, const Route& route);

}  // namespace skipswarm::scheduler

#endif  // SKIPSWARM_SCHEDULER_ROUTE_H_
