// `skipswarm node`: run one daemon of a swarm (see node_daemon.h).
#ifndef SKIPSWARM_CLI_NODE_COMMAND_H_
#define SKIPSWARM_CLI_NODE_COMMAND_H_

#include "common/cli/command.h"

namespace skipswarm::cli {

common::cli::Command NodeCommand();

}  // namespace skipswarm::cli

#endif  // SKIPSWARM_CLI_NODE_COMMAND_H_
