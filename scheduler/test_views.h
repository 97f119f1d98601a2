// Small hand-made views for scheduler tests (testonly).
//
//   TopologyView view = UniformView({1, 2}, /*forward_s=*/1, /*hop_s=*/0.5,
//                                   /*slots=*/2);
//   // stage 0: node "d0"; stage 1: "s1n0", "s1n1"; every hop 0.5 s.
#ifndef SKIPSWARM_SCHEDULER_TEST_VIEWS_H_
#define SKIPSWARM_SCHEDULER_TEST_VIEWS_H_

#include <vector>

#include "scheduler/route.h"
#include "scheduler/topology.h"

namespace skipswarm::scheduler::testing {

// `per_stage[s]` nodes host stage s, indices assigned stage by stage; stage
// 0 nodes are named d<i>, others s<stage>n<i>.
TopologyView UniformView(const std::vector<int>& per_stage, double forward_s,
                         double hop_s, int slots);

// A route for `mb` over the given node indices (origin first and last).
Route MakeRoute(int mb, std::vector<int> nodes, int priority = 0);

}  // namespace skipswarm::scheduler::testing

#endif  // SKIPSWARM_SCHEDULER_TEST_VIEWS_H_
