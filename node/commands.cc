#include "node/commands.h"

#include <iostream>

#include "membership/keygen_command.h"
#include "model/eval_command.h"
#include "model/train_ref_command.h"
#include "node/daemon/local_command.h"
#include "node/daemon/node_command.h"
#include "node/transport/shaping_flags.h"
#include "proto/version.h"
#include "scheduler/plan_command.h"
#include "sim/sim_command.h"
#include "sim/wan_local.h"

namespace skipswarm::node {
namespace {

// `skipswarm local`, with WAN emulation (--wan=SCENARIO, sim/wan_local.h)
// plugged in here: node/daemon may not depend on sim/.
common::cli::Command LocalWithWan() {
  common::cli::Command c = LocalCommand(sim::WanLocalPlanner());
  c.flag_files.push_back(sim::kWanLocalFlagsFile);
  c.flag_files.push_back(kShapingFlagsFile);
  c.usage += " [--wan=SCENARIO --wan_time_scale=K --wan_planner=NAME]";
  return c;
}

common::cli::Command VersionCommand() {
  return {"version", "Print the software and protocol versions",
          "skipswarm version",
          {},
          [](const std::vector<std::string>&) {
            std::cout << "skipswarm " << proto::kSoftwareVersion
                      << " (protocol v" << static_cast<int>(proto::kProtocolVersion)
                      << ")\n";
            return 0;
          }};
}

}  // namespace

std::vector<common::cli::Command> AllCommands() {
  return {
      scheduler::PlanCommand(),
      model::TrainRefCommand(),
      model::EvalCommand(),
      sim::SimCommand(),
      NodeCommand(),
      LocalWithWan(),
      membership::KeygenCommand(),
      VersionCommand(),
  };
}

}  // namespace skipswarm::node
