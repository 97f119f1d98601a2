// The list of `skipswarm` subcommands, in the order `skipswarm help` shows
// them. Adding a command: write `FooCommand()` in the module that owns it
// and add it to AllCommands() in commands.cc.
#ifndef SKIPSWARM_CLI_COMMANDS_H_
#define SKIPSWARM_CLI_COMMANDS_H_

#include <vector>

#include "common/cli/command.h"

namespace skipswarm::cli {

std::vector<common::cli::Command> AllCommands();

}  // namespace skipswarm::cli

#endif  // SKIPSWARM_CLI_COMMANDS_H_
