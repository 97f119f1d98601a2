// `skipswarm node`: run one daemon of a swarm (see node_daemon.h).
#ifndef SKIPSWARM_NODE_DAEMON_NODE_COMMAND_H_
#define SKIPSWARM_NODE_DAEMON_NODE_COMMAND_H_

#include "common/cli/command.h"

namespace skipswarm::node {

common::cli::Command NodeCommand();

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_NODE_COMMAND_H_
