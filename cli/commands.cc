#include "cli/commands.h"

#include <iostream>
#include <string>
#include <utility>

#include "cli/invite_command.h"
#include "cli/node_command.h"
#include "common/stamp/git_commit.h"
#include "identity/keygen_command.h"
#include "launcher/local_command.h"
#include "launcher/wan_local.h"
#include "model/checkpoints_command.h"
#include "model/eval_command.h"
#include "model/export_command.h"
#include "model/train_ref_command.h"
#include "node/transport/shaping_flags.h"
#include "model/build_info.h"
#include "proto/version.h"
#include "scheduler/plan_command.h"
#include "sim/sim_command.h"

namespace skipswarm::cli {
namespace {

// `skipswarm local`, with WAN emulation (--wan=SCENARIO, launcher/wan_local.h)
// plugged in here: the launcher's process management builds without sim/.
common::cli::Command LocalWithWan() {
  common::cli::Command c = launcher::LocalCommand(launcher::WanLocalPlanner());
  c.flag_files.push_back(launcher::kWanLocalFlagsFile);
  c.flag_files.push_back(node::kShapingFlagsFile);
  c.usage += " [--wan=SCENARIO --wan_time_scale=K --wan_planner=NAME]";
  return c;
}

common::cli::Command VersionCommand() {
  return {"version", "Print the version, protocol, git commit, libtorch version, CUDA",
          "skipswarm version   (or skipswarm --version)",
          {},
          [](const std::vector<std::string>&) {
            std::cout << "skipswarm " << proto::kSoftwareVersion << " (protocol v"
                      << static_cast<int>(proto::kProtocolVersion) << ")\n"
                      << "git commit: " << common::GitCommit()
                      << (std::string(common::GitCommit()) == "unknown"
                              ? " (not stamped: bazel build --config=release in a git checkout)"
                              : "")
                      << "\n"
                      << "libtorch: " << model::LibtorchVersion() << "\n"
                      << "CUDA available: " << (model::CudaAvailable() ? "yes" : "no") << "\n";
            return 0;
          }};
}

}  // namespace

std::vector<common::cli::Command> AllCommands(NodeBackendWrapper wrap) {
  return {
      scheduler::PlanCommand(),
      model::TrainRefCommand(),
      model::EvalCommand(),
      model::ExportCommand(),
      model::CheckpointsCommand(),
      sim::SimCommand(),
      NodeCommand(std::move(wrap)),
      LocalWithWan(),
      identity::KeygenCommand(),
      InviteCommand(),
      RevokeCommand(),
      VersionCommand(),
  };
}

}  // namespace skipswarm::cli
