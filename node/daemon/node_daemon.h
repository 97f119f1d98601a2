// NodeDaemon: one `skipswarm node` process. Wires the real pieces together:
// gRPC transport (pipeline frames), gRPC group (barrier + replica
// averaging), libtorch computes for the hosted stages, the stage server,
// the data-node driver (when hosting stage 0) and the iteration loop; adds
// checkpoints, a progress line per iteration and Prometheus /metrics.
//
//   NodeDaemonOptions o = ...;                      // from flags / config
//   SS_ASSIGN_OR_RETURN(auto daemon, NodeDaemon::Create(o));
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
#ifndef SKIPSWARM_NODE_DAEMON_NODE_DAEMON_H_
#define SKIPSWARM_NODE_DAEMON_NODE_DAEMON_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "model/model_flags.h"
#include "node/daemon/swarm_spec.h"

namespace skipswarm::node {

struct NodeDaemonOptions {
  std::string name;                // this node's entry in `swarm`
  std::vector<SwarmMember> swarm;
  std::string listen;              // pipeline address; empty: from the swarm entry
  std::string group_listen;        // StageService address; empty: from the entry
  int metrics_port = -1;           // -1: no /metrics; 0: any free port
  std::string metrics_host = "127.0.0.1";
  int memory_slots = 4;
  int mbs_per_iteration = 4;       // per data node
  int64_t iterations = 100;        // total (also the LR schedule length)
  int64_t checkpoint_every = 0;    // 0: only at the end
  std::string swarm_id;
  // Note [Static swarm security] (swarm_spec_tls.h): mutual TLS from this
  // key (every --swarm entry pinned to its node id), or plain text only
  // with `insecure`. Exactly one of the two.
  std::string key_file;
  bool insecure = false;
  // "inorder" (full in-order routes, replicas round-robin) or a scheduler
  // planner: "skippipe", "pipeline", "noskip", "random".
  std::string planner = "inorder";
  int path_length = 0;             // P for skipping planners; 0 = all stages
  std::string progress_file;       // JSON line per iteration (data nodes); empty: none
  std::string record_routes;       // data nodes: append planned routes (route_recorder.h)
  absl::Duration startup_timeout = absl::Seconds(120);
  model::ModelFlags model;         // model, runtime, optimiser, corpus, seed, checkpoint_dir
  // WAN emulation and bandwidth caps (issue 7, node/transport/wan_table.h):
  // when wan_table is set or a cap is > 0, the pipeline transport is
  // wrapped in a ShapingTransport. wan_table: this node's region and the
  // link table (all members by name); time_scale k: latencies / k,
  // bandwidths x k (and timed compute / k). Caps in bytes/s, <= 0: none.
  struct Wan {
    std::string wan_table;
    double time_scale = 1;
    double max_upload_bytes_per_second = 0;
    double max_download_bytes_per_second = 0;
    // > 0: TimedStageCompute with this forward time (scenario seconds,
    // divided by time_scale) and dummy payloads instead of libtorch, for
    // WAN experiments on a small machine; the data node reads no corpus.
    double timed_forward_s = 0;
    uint64_t timed_payload_bytes = 1 << 20;
    // Non-empty: replay these routes (RoutesFilePlanner) instead of `planner`.
    std::string routes_file;
  } wan;
};

class NodeDaemon {
 public:
  static absl::StatusOr<std::unique_ptr<NodeDaemon>> Create(const NodeDaemonOptions& options);
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

#endif  // SKIPSWARM_NODE_DAEMON_NODE_DAEMON_H_
