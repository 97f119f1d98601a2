// `poisoning_skipswarm`: the `skipswarm` binary plus one flag, --poison
// (tests only: it is not in the production binary). A node started with
// it lies to its replica group (poisoned_compute.h); every other command
// and flag is skipswarm's. `poisoning_skipswarm local
// --local_node_config=s1r0:poison=signflip:8` runs a local swarm whose
// node s1r0 lies (the local launcher starts its nodes from this binary).
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "cli/commands.h"
#include "common/cli/runner.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "tests/adversarial/poison/poisoned_compute.h"

ABSL_FLAG(std::string, poison, "",
          "What this node's replica group gets instead of its gradient: scale:F, "
          "signflip:F or nan, with an optional :K to lie in every K-th round only "
          "(empty: the truth).");

namespace skipswarm::tests {
namespace {

node::NodeBackend Poisoning(node::NodeBackend backend) {
  auto honest = std::move(backend.create_compute);
  backend.create_compute =
      [honest = std::move(honest)](const node::NodeDaemonOptions& o, int stage,
                                   node::TaskRunner* runner, common::Clock* clock)
      -> absl::StatusOr<std::unique_ptr<node::StageCompute>> {
    SS_ASSIGN_OR_RETURN(std::unique_ptr<node::StageCompute> compute,
                        honest(o, stage, runner, clock));
    SS_ASSIGN_OR_RETURN(Poison poison, ParsePoison(absl::GetFlag(FLAGS_poison)));
    if (poison.kind == Poison::Kind::kNone) return compute;
    LOG(WARNING) << o.name << ": stage " << stage << " lies to its replica group: --poison="
                 << absl::GetFlag(FLAGS_poison);
    return std::make_unique<PoisonedStageCompute>(std::move(compute), poison);
  };
  return backend;
}

}  // namespace
}  // namespace skipswarm::tests

int main(int argc, char** argv) {
  std::vector<skipswarm::common::cli::Command> commands =
      skipswarm::cli::AllCommands(skipswarm::tests::Poisoning);
  for (skipswarm::common::cli::Command& c : commands) {
    if (c.name == "node") {
      c.flag_files.push_back("tests/adversarial/poison/poisoning_skipswarm_main.cc");
    }
  }
  return skipswarm::common::cli::RunCli(argc, argv, commands);
}
