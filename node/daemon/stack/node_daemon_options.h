// NodeDaemonOptions: what `skipswarm node` is told (flags, config file),
// for both daemons (NodeDaemon over a static --swarm list; GossipDaemon
// holds one as its base) and the data node's planner factory
// (planner_factory.h), which is why it has a header of its own.
//
// Thread rule: a plain value.
#ifndef SKIPSWARM_NODE_DAEMON_STACK_NODE_DAEMON_OPTIONS_H_
#define SKIPSWARM_NODE_DAEMON_STACK_NODE_DAEMON_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "model/codec_options.h"
#include "model/model_flags.h"
#include "model/sdp_assignment.h"
#include "node/daemon/stack/swarm_spec.h"

namespace skipswarm::node {

struct NodeDaemonOptions {
  std::string name;                // this node's entry in `swarm`
  std::vector<SwarmMember> swarm;
  std::string listen;              // pipeline address; empty: from the swarm entry
  std::string group_listen;        // StageService address; empty: from the entry
  int metrics_port = -1;           // -1: no /metrics; 0: any free port
  std::string metrics_host = "127.0.0.1";  // --metrics_listen's host
  // Labels of skipswarm_build_info beside the version (the binary fills
  // them in; node/ links no torch version of its own).
  std::string libtorch_version = "unknown";
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
  // A scheduler planner: "skippipe" (the default, as --node_planner),
  // "pipeline", "noskip", "random"; or "inorder" (full in-order routes,
  // replicas round-robin). Built by CreateDataNodePlanner.
  std::string planner = "skippipe";
  // The scheduler planner's hop costs from measured links (Note [Planning
  // from measured links]); false: the uniform estimate, for comparisons.
  bool planner_link_costs = true;
  int path_length = 0;             // P for skipping planners; 0 = all stages
  // This node's defence of its replica averaging (a local choice, not a
  // swarm setting): Note [Robust averaging] (node/train/robust_sum.h),
  // outlier_factor 0: no centered clipping; Note [Group bans]
  // (node/train/grpc_group.h), ban_after 0: no bans.
  double outlier_factor = 3.0;
  int ban_after = 3;
  // Note [Newcomer weight] (node/train/robust_sum.h): the weight of a
  // member on probation in this node's replica averaging, in [0, 1].
  double newcomer_weight = 0;
  // Verified compute (Note [Sending checks] in node/stage/
  // stage_server_verify_send.cc, Note [Verify trust] in
  // node/stage/verify_trust.h): the share of forward frames to a member on
  // probation that a trusted second replica also computes, verify-only
  // (0: off, the default until a real-process swarm has priced it), the
  // seed of that sampling, and the strikes at which this node condemns a
  // checked member (<= 0: never).
  double verify_rate = 0;
  uint64_t verify_seed = 1;
  double verify_exclude_at = 3;
  // Note [Checkable evidence] (node/compute/evidence.h): this node signs an
  // OutputCommitment on every forward frame it produces past stage 0,
  // checks every commitment that reaches it, and refuses a frame without
  // one from a member whose record says it signs (NodeRecord.sign_frames,
  // which this sets). Off by default; gossip daemons only (a static swarm
  // has no member records to take keys from).
  bool sign_frames = false;
  // The swarm manifest says frames are signed (SwarmManifest.sign_frames;
  // Note [Checkable evidence], "Signed swarms"): requires sign_frames; a
  // forward frame without a valid commitment is refused from any member,
  // and membership refuses a record that does not sign. `skipswarm node`
  // sets both from the manifest; only in-process tests set sign_frames
  // alone (a mixed swarm).
  bool swarm_signs_frames = false;
  // Subnetwork data parallelism (model/sdp_assignment.h): a data node trains
  // the stages it hosts on its own data (SdpPlanner: no frame leaves it);
  // with kBackward it also runs frozen copies of the other stages, kept
  // current by SdpShadowStages (Note [SDP frozen stages]). Overrides `planner`.
  model::SdpMode sdp = model::SdpMode::kOff;
  std::string progress_file;       // JSON line per iteration (iteration_report.h); empty: none
  std::string record_routes;       // data nodes: append planned routes (route_recorder.h)
  absl::Duration startup_timeout = absl::Seconds(120);
  // A stop that has not finished its iteration within this abandons it
  // and exits with the checkpoint of the last finished step (Note
  // [Stopping] in node/daemon/gossip/gossip_daemon.cc).
  absl::Duration stop_timeout = absl::Seconds(30);
  model::ModelFlags model;         // model, runtime, optimiser, corpus, seed, checkpoint_dir
  // How the libtorch computes encode activations and gradients on the wire
  // (CreateTorchStageCompute); the planners' hop cost sizes a hop with it
  // (ActivationBytesPerMicroBatch).
  model::EncodeOptions activation_encode;
  // WAN emulation and bandwidth caps (node/transport/wan_table.h):
  // when wan_table is set or a cap is > 0, the pipeline transport is
  // wrapped in a ShapingTransport. wan_table: this node's region and the
  // link table (all members by name); time_scale k: latencies / k,
  // bandwidths x k (and timed compute / k). Caps in bytes/s, <= 0: none.
  struct Wan {
    std::string wan_table;
    double time_scale = 1;
    double max_upload_bytes_per_second = 0;
    // Replica averaging's pushes alone (--max_sync_upload_mbps); 0: the cap
    // above.
    double max_sync_upload_bytes_per_second = 0;
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

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_STACK_NODE_DAEMON_OPTIONS_H_
