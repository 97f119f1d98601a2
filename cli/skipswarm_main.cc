// The `skipswarm` binary: one executable, one subcommand per role.
//
// Each module that owns a subcommand provides a `common::cli::Command`; this
// file only lists them. `main` is the one place that picks concrete
// implementations (docs/DESIGN.md §2), and the commands do that in their run
// functions.
#include <iostream>
#include <vector>

#include "common/cli/runner.h"
#include "cli/commands.h"

int main(int argc, char** argv) {
  return skipswarm::common::cli::RunCli(argc, argv,
                                        skipswarm::cli::AllCommands());
}
