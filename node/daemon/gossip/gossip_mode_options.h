// Which NodeDaemonOptions a gossip node (no --swarm list: --join or a
// founder with --host_stages) cannot honour, refused at start with a clear
// error instead of being silently ignored. Each of them names nodes of a
// static --swarm list or needs what only NodeDaemon builds:
//   wan.wan_table       a link table by --swarm names (use the bandwidth caps)
//   wan.routes_file     --node_routes: routes by --swarm names
//   wan.timed_forward_s --node_timed_forward_s: NodeDaemon's timed compute
//
//   SS_RETURN_IF_ERROR(CheckGossipModeOptions(options.base));
//
// Thread rule: a pure function.
#ifndef SKIPSWARM_NODE_DAEMON_GOSSIP_GOSSIP_MODE_OPTIONS_H_
#define SKIPSWARM_NODE_DAEMON_GOSSIP_GOSSIP_MODE_OPTIONS_H_

#include "absl/status/status.h"
#include "node/daemon/stack/node_daemon_options.h"

namespace skipswarm::node {

// InvalidArgument naming the first such option set (by its flag) and what
// to use instead; OK when none is.
absl::Status CheckGossipModeOptions(const NodeDaemonOptions& base);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_GOSSIP_GOSSIP_MODE_OPTIONS_H_
