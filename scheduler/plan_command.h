// `skipswarm plan`: plan routes for a scenario and compare planners.
//
//   skipswarm plan --planner=all
//       --scenario=scheduler/testdata/skippipe_gcp20_schedule.json
//   skipswarm plan --skippipe_json=schedule.json --planner=skippipe
//       --budget_ms=200 --format=json
//   skipswarm plan --scenario=scheduler/scenarios/gcp12-24.json
//
// --scenario reads either format (scenario.h); --skippipe_json insists on
// SkipPipe's. --planner is one of pipeline, noskip, random, skippipe, replay
// or "all" (every planner, side by side, replay of --replay_key). Text
// output is a table with the plan-independent lower bound; --format=json
// prints one JSON object per planner (one line each). --show_routes adds
// the routes to the text output. Exit code 0 when every plan is valid, 1 on
// a bad scenario or an invalid plan.
//
// The command is registered by the `skipswarm` binary (node/); for
// development, //scheduler:plan_tool runs just this command.
#ifndef SKIPSWARM_SCHEDULER_PLAN_COMMAND_H_
#define SKIPSWARM_SCHEDULER_PLAN_COMMAND_H_

#include "common/cli/command.h"

namespace skipswarm::scheduler {

common::cli::Command PlanCommand();

}  // namespace skipswarm::scheduler

#endif  // SKIPSWARM_SCHEDULER_PLAN_COMMAND_H_
