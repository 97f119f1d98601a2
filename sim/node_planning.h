// How a simulated node plans and repairs routes (the nodes backend,
// sim/node_swarm.h): with the daemons' own node::SchedulerPlanner and
// node::SchedulerRouteRepairer, given the scenario's costs through
// node::PlanningCosts' outside-cost seam (sec_per_layer_sample_of,
// hop_s_of) where a daemon reads its gossip measurements. Nothing else
// differs from a daemon's recipe (node/daemon/stack/planner_factory.h)
// but what a simulation needs and a daemon does not:
//  * seed_per_iteration = false: every iteration is planned with the
//    scenario's seed, so a plan is reused while the view holds;
//  * a node::PlanCache shared by the data nodes (one search per distinct
//    view; planning is deterministic, so sharing changes wall time only),
//    keyed by WorldCostsKey, and with SimOptions::replan "incremental" the
//    cache's ReplanForLeavers;
//  * the scenario's route rules, balance tolerance, search effort, and for
//    planner "replay" the scenario's route set.
// `same_decision_test.cc` in tests/integration checks that a daemon's
// planner and repairer given the same view and costs decide the same.
//
//   node::PlanCache cache(WorldCostsKey(&world), options.wall_clock);
//   auto planner = node::SchedulerPlanner::Create(
//       SimPlannerOptions(scenario, options, &world, &cache));
//   node::SchedulerRouteRepairer repairer(SimRepairerOptions(scenario, &world));
//
// Thread rule: the returned functions read the world; single-threaded like it.
#ifndef SKIPSWARM_SIM_NODE_PLANNING_H_
#define SKIPSWARM_SIM_NODE_PLANNING_H_

#include <functional>
#include <string>

#include "node/train/plan_cache.h"
#include "node/train/scheduler_planner.h"
#include "node/train/scheduler_repairer.h"
#include "sim/driver.h"
#include "sim/node_world.h"
#include "sim/scenario.h"

namespace skipswarm::sim {

// The scenario's costs: t_v x the straggler factor the world says was
// measured, the universe's hop times, kNoLink across a partition. `world`
// is borrowed and must outlive the costs.
node::PlanningCosts ScenarioCosts(NodeWorld* world);

// A string that changes whenever ScenarioCosts may answer differently
// (stragglers' factors, partitions): the PlanCache's costs_key.
std::function<std::string()> WorldCostsKey(const NodeWorld* world);

// The planner name the run uses (the options' over the scenario's).
std::string SimPlannerName(const SimScenario& scenario, const SimOptions& options);

node::SchedulerPlannerOptions SimPlannerOptions(const SimScenario& scenario,
                                                const SimOptions& options, NodeWorld* world,
                                                node::PlanCache* cache);

node::SchedulerRepairerOptions SimRepairerOptions(const SimScenario& scenario, NodeWorld* world);

}  // namespace skipswarm::sim

#endif  // SKIPSWARM_SIM_NODE_PLANNING_H_
