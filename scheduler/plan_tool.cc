// Development entry point running only `skipswarm plan` (the real binary,
// node/, registers PlanCommand() next to the other commands):
//   bazel run //scheduler:plan_tool -- plan --scenario=... --planner=all
#include "common/cli/runner.h"
#include "scheduler/plan_command.h"

int main(int argc, char** argv) {
  return skipswarm::common::cli::RunCli(
      argc, argv, {skipswarm::scheduler::PlanCommand()});
}
