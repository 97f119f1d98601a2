// `bazel run -c opt //sim -- sim --sim_scenario=...`: the sim command
// without the rest of the daemon (no gRPC, no libtorch to link).
#include "common/cli/runner.h"
#include "sim/sim_command.h"

int main(int argc, char** argv) {
  return skipswarm::common::cli::RunCli(argc, argv,
                                        {skipswarm::sim::SimCommand()});
}
