// The `skippipe` planner: network-, compute-, memory- and collision-aware
// skip routes per micro-batch, balanced across stages, anytime.
//
// Algorithm (two phases, all randomness from the request's seed):
//
// 1. Criticality-ordered greedy. For each origin o compute its fastest
//    valid route L(o) (RouteSearcher, exact) and its bound
//    B(o) = max(ceil(M / slots_o) x L(o), M x 2.75 c_o): the iteration can
//    end no sooner. Origins are ranked by B(o), largest first, and that
//    rank becomes every route's `priority`, so on a shared node the MB with
//    the least slack goes first. MBs are then placed round by round (MB j
//    of every origin, most critical origin first); each takes the cheapest
//    route under
//      cost = RouteLatency + beta x (work other origins already put on the
//             visited nodes) + gamma x (how far each visited stage is ahead
//             of its fair share so far),
//    never visiting a stage already at its balance cap. An origin never
//    pays for its own load: its MBs follow each other through a pipeline
//    of nodes, which costs it little, while sharing with other origins is
//    what collides. A final repair pass pulls visits into any stage left
//    below its balance floor.
// 2. Local search scored by the evaluator (evaluator.h). Each step picks a
//    move - re-route one MB of the origin that finishes last (or of a random
//    origin) with jittered load penalties and sometimes one of its nodes
//    banned; move one hop to another replica of the same stage; or swap two
//    origins' priorities - keeps it if the balance still holds and
//    (iteration time, sum of MB finish times) does not get worse, and stops
//    at the budget, at max_evaluations, or after stall_evaluations steps
//    without improvement.
//
// Worked example (the reference file, scheduler/testdata): the Australian
// data node n11 has the slowest fastest route, n11 -> n8 (Singapore, stage
// 1) -> n16 (Japan, 3) -> n9 (Taiwan, 2) -> n11 at 15.14 s, and 6 MBs on 3
// slots, so B = 30.28 s bounds the iteration. It ranks first; all six of its
// MBs take that route, and the Japanese data node, whose own best route
// uses the same three nodes, is pushed to other replicas by beta. The local
// search then removes the remaining collisions; the plan ends at ~32.5 s:
// n11's last MB cannot start before its origin has run three backwards and
// two forwards after its first MB returned.
//
// Thread rule: see planner.h.
#ifndef SKIPSWARM_SCHEDULER_SKIPPIPE_PLANNER_H_
#define SKIPSWARM_SCHEDULER_SKIPPIPE_PLANNER_H_

#include <memory>

#include "scheduler/planner.h"

namespace skipswarm::scheduler {

// `full_routes`: the `noskip` variant (P = S, no swaps).
std::unique_ptr<Planner> NewSkipPipePlanner(bool full_routes);

}  // namespace skipswarm::scheduler

#endif  // SKIPSWARM_SCHEDULER_SKIPPIPE_PLANNER_H_
