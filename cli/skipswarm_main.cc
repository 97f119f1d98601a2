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
  // First, before anything starts a thread: it may re-execute the binary with
  // the OpenBLAS core chosen (Note [BLAS core]). Every subcommand and every
  // process the launcher starts inherits the choice.
  const skipswarm::common::BlasCoreDecision blas = skipswarm::common::SetUpBlasCore(argv);
  return skipswarm::common::cli::RunCli(argc, argv, skipswarm::cli::AllCommands(),
                                        [&blas] { skipswarm::common::LogBlasCore(blas); });
}
