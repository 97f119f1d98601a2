// NodeDaemon: one `skipswarm node` process. Wires the real pieces together:
// gRPC transport (pipeline frames), gRPC group (barrier + replica
// averaging), the hosted stages' computes (from the NodeBackend main
// passes in: libtorch's in the binary; this target links no libtorch), the stage server,
// the data-node driver (when hosting stage 0) and the iteration loop; adds
// checkpoints, a progress line per iteration and Prometheus /metrics.
//
//   NodeDaemonOptions o = ...;                      // from flags / config
//   SS_ASSIGN_OR_RETURN(auto daemon, NodeDaemon::Create(o, TorchNodeBackend()));
//   std::atomic<bool> stop{false};                  // set by SIGINT/SIGTERM
//   return daemon->Run(&stop);
//
// Security: mutual TLS from key_file with every peer pinned to its --swarm
// entry's node id, or plain text behind `insecure` (swarm_spec_tls.h).
// Startup: every member's StageService must answer within startup_timeout
// (launch order does not matter). Resume: a node with checkpoints in
// checkpoint_dir continues at their step; all nodes must resume at the
// same iteration (they do when they checkpoint together, as here).
// Shutdown: `stop` lets the current iteration finish (in-flight MBs drain,
// replicas step), then checkpoints and returns.
//
// Thread rule: Create and Run on main's thread; callbacks run on the clock's
// and gRPC's threads.
#ifndef SKIPSWARM_NODE_DAEMON_STATIC_SWARM_NODE_DAEMON_H_
#define SKIPSWARM_NODE_DAEMON_STATIC_SWARM_NODE_DAEMON_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "node/daemon/stack/node_backend.h"
#include "node/daemon/stack/node_daemon_options.h"

namespace skipswarm::node {

class NodeDaemon {
 public:
  // `backend` builds the computes and the data (node_backend.h; the
  // binary passes TorchNodeBackend()); it is used only inside Create.
  static absl::StatusOr<std::unique_ptr<NodeDaemon>> Create(const NodeDaemonOptions& options,
                                                            const NodeBackend& backend);
  ~NodeDaemon();

  // Trains until `iterations` or until *stop becomes true; then
  // checkpoints (if checkpoint_dir is set).
  absl::Status Run(const std::atomic<bool>* stop);

  struct Parts;

 private:
  explicit NodeDaemon(std::unique_ptr<Parts> parts);
  std::unique_ptr<Parts> parts_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_STATIC_SWARM_NODE_DAEMON_H_
