// `skipswarm node`: run one daemon of a swarm (see node_daemon.h).
#ifndef SKIPSWARM_CLI_NODE_COMMAND_H_
#define SKIPSWARM_CLI_NODE_COMMAND_H_

#include <functional>

#include "common/cli/command.h"
#include "node/daemon/stack/node_backend.h"

namespace skipswarm::cli {

// Wraps the libtorch backend before either daemon gets it: a test binary's
// decorators (tests/adversarial/poison/); null: the backend as it is.
using NodeBackendWrapper = std::function<node::NodeBackend(node::NodeBackend)>;

common::cli::Command NodeCommand(NodeBackendWrapper wrap = nullptr);

}  // namespace skipswarm::cli

#endif  // SKIPSWARM_CLI_NODE_COMMAND_H_
