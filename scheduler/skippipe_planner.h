// The `skippipe` planner: network-, compute-, memory- and collision-aware
// skip routes per micro-batch, balanced across stages, anytime.
//
// Algorithm (two phases, all randomness from the request's seed):
//
// 1. Criticality-ordered greedy. For each origin o compute its fastest
//    valid route L(o) (RouteSearcher, exact unless candidates_per_stage
//    trims big stages) and its bound B(o) = max(ceil(M / slots_o) x L(o),
//    M x 2.75 c_o): the iteration can end no sooner. Origins are ranked by
//    B(o), largest first; the rank sets every route's `priority`, so on a
//    shared node the MB with the least slack goes first. Origins are then
//    served in rank order, each placing all its MBs; every MB takes the
//    cheapest route under
//      cost = RouteLatency + slack(o) x [ beta x compute other origins put
//             on the visited nodes + gamma x how far each visited stage is
//             ahead of its fair share + kMemory x memory slots the node
//             would need beyond its own if every origin's busiest wave
//             through it were in flight at once ],
//    never visiting a stage at its balance cap. slack(o) shrinks to ~0 for
//    the most critical origin, so it keeps its fastest routes; an origin
//    never pays for its own load (its MBs pipeline through the same nodes
//    cheaply); memory slots get the heaviest weight because a forward that
//    finds no slot waits for a whole backward elsewhere. A repair pass then
//    pulls visits into any stage left below its balance floor.
// 2. Local search scored by the evaluator (evaluator.h). It starts from the
//    best of four injection disciplines (first or later MBs first at the
//    origin; first wave injected at once or spaced by 2.5 x the slowest
//    forward of the route, so MBs sharing nodes do not queue behind each
//    other's backwards). Each step: re-route one MB of the origin that
//    finishes last (or of a random origin) with jittered penalties and
//    sometimes one of its nodes banned; move one hop to another replica;
//    copy a sibling MB's route; reorder one MB within its origin; delay or
//    release one injection; or swap two origins' ranks. A step that breaks
//    the balance is repaired by re-routing other MBs (most slack first).
//    It is kept if (iteration time, sum of MB finish times) does not get
//    worse. The search stops at the budget, after max_evaluations steps,
//    after stall_evaluations steps without improvement, or when it reaches
//    the evaluator's lower bound (then the plan is optimal).
//
// Worked example (the reference file, scheduler/testdata): the Australian
// data node n11 has the slowest fastest route, n11 -> n8 (Singapore, stage
// 1) -> n16 (Japan, 3) -> n9 (Taiwan, 2) -> n11 at 15.142 s, and 6 MBs on
// 3 slots, so it ranks first and takes that route for all six MBs. The
// Japanese data node, whose own fastest route uses the same three nodes,
// finds their slots full (kMemory) and goes elsewhere. Injected at once,
// n11's MBs would end at 32.924 s, like SkipPipe's own ca-paths: its second
// wave follows the first at 0.44 s intervals and queues behind the 0.66 s
// backwards. The spaced discipline injects the first wave 1.1 s apart; the
// last MB then ends at 2 x 15.142 + 5 x 0.44 = 32.484 s, the evaluator's
// lower bound (term (d)), so the search stops at once: optimal for this
// cost model, in well under a millisecond.
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
