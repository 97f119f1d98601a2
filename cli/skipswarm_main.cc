// The `skipswarm` binary: one executable, one subcommand per role.
//
// Each module that owns a subcommand provides a `common::cli::Command`; this
// file only lists them. `main` is the one place that picks concrete
// implementations (docs/DESIGN.md §2), and the commands do that in their run
// functions.
#include <iostream>
#include <vector>

#include "cli/commands.h"
#include "common/blas_setup.h"
#include "common/cli/runner.h"

int main(int argc, char** argv) {
  const std::vector<skipswarm::common::cli::Command> commands = skipswarm::cli::AllCommands();
  // First, before anything starts a thread, for a command that runs the
  // model's kernels: it may re-execute the binary with the OpenBLAS core
  // chosen (Note [BLAS core]). The processes it starts inherit the choice.
  const auto blas = skipswarm::common::SetUpBlasCoreFor(
      skipswarm::common::cli::CommandToRun(argc, argv, commands), argv);
  return skipswarm::common::cli::RunCli(argc, argv, commands,
                                        [&blas] { skipswarm::common::LogBlasCore(blas); });
}
