// The list of `skipswarm` subcommands, in the order `skipswarm help` shows
// them. Adding a command: write `FooCommand()` in the module that owns it
// and add it to AllCommands() in commands.cc.
#ifndef SKIPSWARM_CLI_COMMANDS_H_
#define SKIPSWARM_CLI_COMMANDS_H_

#include <vector>

#include "cli/node_command.h"
#include "common/cli/command.h"

namespace skipswarm::cli {

// `wrap`: NodeCommand's (a test binary's decorators; null in `skipswarm`).
std::vector<common::cli::Command> AllCommands(NodeBackendWrapper wrap = nullptr);

}  // namespace skipswarm::cli

#endif  // SKIPSWARM_CLI_COMMANDS_H_
