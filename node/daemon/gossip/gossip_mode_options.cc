#include "node/daemon/gossip/gossip_mode_options.h"

namespace skipswarm::node {

absl::Status CheckGossipModeOptions(const NodeDaemonOptions& base) {
  if (!base.wan.wan_table.empty()) {
    return absl::InvalidArgumentError(
        "--wan_table needs a static --swarm list (it names nodes); with --join use "
        "--max_upload_mbps / --max_download_mbps");
  }
  // Why refuse rather than honour: the file's routes name nodes by their
  // --swarm names, and a gossip swarm has no such names (members are ids
  // that join and leave); replaying a fixed plan would also fight the
  // membership changes gossip exists for.
  if (!base.wan.routes_file.empty()) {
    return absl::InvalidArgumentError(
        "--node_routes needs a static --swarm list (the file names nodes by their --swarm "
        "names); a gossip node (--join / --host_stages) plans its routes with --node_planner");
  }
  if (base.wan.timed_forward_s > 0) {
    return absl::InvalidArgumentError(
        "--node_timed_forward_s (timed compute) needs a static --swarm list; a gossip node "
        "trains with libtorch");
  }
  return absl::OkStatus();
}

}  // namespace skipswarm::node
