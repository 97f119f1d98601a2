#include "node/commands.h"

#include <iostream>

#include "membership/keygen_command.h"
#include "model/eval_command.h"
#include "model/train_ref_command.h"
#include "node/daemon/local_command.h"
#include "node/daemon/node_command.h"
#include "proto/version.h"
#include "scheduler/plan_command.h"
#include "sim/sim_command.h"

namespace skipswarm::node {
namespace {

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
      LocalCommand(),
      membership::KeygenCommand(),
      VersionCommand(),
  };
}

}  // namespace skipswarm::node
