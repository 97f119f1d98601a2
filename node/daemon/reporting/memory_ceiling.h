// The stated memory ceiling of a daemon (Note [Memory ceiling]): the most
// resident memory the node may use whatever its peers send, computed from
// the model config, the stages it hosts, its admission limits and its
// quotas. The daemon logs it at start ("memory ceiling: ...") and exports it
// as skipswarm_memory_ceiling_bytes; tools/experiments/attack_suite.sh
// compares every honest node's peak RSS with it.
//
//   MemoryCeilingInputs in;
//   in.model = flags.model;  in.samples_per_mb = 4;  in.hosted_stages = 1;
//   in.quotas = &quotas;  in.grpc_memory_quota_bytes = GrpcMemoryQuotaBytes(...);
//   in.relay_slots = 16;  in.grpc_max_threads = kDaemonGrpcMaxThreads;
//   MemoryCeiling c = ComputeMemoryCeiling(in);
//   LOG(INFO) << DescribeMemoryCeiling(c);
//
// Thread rule: pure functions (the quotas are only read).
#ifndef SKIPSWARM_NODE_DAEMON_REPORTING_MEMORY_CEILING_H_
#define SKIPSWARM_NODE_DAEMON_REPORTING_MEMORY_CEILING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "node/daemon/reporting/daemon_quotas.h"
#include "node/daemon/reporting/metrics.h"
#include "node/transport/relay/relay_service.h"

namespace skipswarm::node {

// Note [Memory ceiling]
// A node's resident memory is what the process needs to exist, what its own
// training needs, and what peers can make it hold. The ceiling is the sum of
// a bound on each, every bound one the node enforces (a peer that would go
// past it is refused), so a peer cannot push the node past the sum:
//   baseline    the process at rest: libtorch, gRPC, code, threads, the
//               allocator's arenas (kProcessBaselineBytes, measured: an idle
//               daemon of the tiny model, rounded up), plus an allowance for
//               the control plane (the gossip table, whose records and
//               messages are bounded, evidence, the manifest, logs:
//               kControlPlaneBytes).
//   stages      per hosted stage (the largest stage's size: a node may move),
//               weights, gradients, AdamW moments and the activations of
//               memory_slots micro-batches in flight
//               (model::EstimateStageMemory).
//   frames      per hosted stage, the pipeline frames admission lets wait:
//               (memory_slots + max_queued_forwards) for the current
//               iteration and as many for later ones (Note [Admitted
//               iterations] in node/stage/stage_server.h), plus one backward
//               frame per slot, each at most F (model::MaxFramePayloadBytes).
//               Frames of any other iteration are refused, never parked.
//   averaging   the replica group's early-shard budget (max(64 MiB, 2 rounds
//               x 2 x the hosted stages' parameter bytes), Note [Push
//               admission]) plus, per hosted stage, a round's received parts,
//               gathered shards and result (3 P).
//   state       per hosted stage, one state being received and one snapshot
//               being served, each at most S = 7 P + 1 MiB (the bound state
//               transfer refuses past, StateBytesBound).
//   grpc        gRPC's memory quota on the node's server: every connection's
//               and stream's buffers together (Note [gRPC memory quota] in
//               node/transport/node_server.h).
//   strangers   what all strangers together may have admitted at once: the
//               byte bursts of the shared stranger budgets (Note [Peer
//               quotas]) of pipeline, group, state, manifest and gossip,
//               and of their proven joiners' (Note [Joiners' budget]).
//   relay       when the node serves as a relay (relay_slots > 0; else 0),
//               what its circuits hold, members' and strangers' alike
//               (Note [Relay memory] in relay_service.h,
//               RelayHeldBytesBound): per circuit handler one message in
//               hand and its copy being written, each at most
//               kRelayMaxMessageBytes (larger ones are refused), and its
//               opening; handlers at most 2 x relay_slots x circuits per
//               node, and at most the server's thread limit (each holds a
//               sync-server thread); plus each circuit's and attachment's
//               state, calls queued to attached nodes included. The bytes
//               the relay's streams buffer inside gRPC are the grpc term's.
// Members are bounded per peer by rates, not in sum; what they can make the
// node hold is bounded by the stage terms above (admission, the push window,
// state size), which do not grow with their number.
// The figures are upper-leaning estimates of live bytes; the allocator's
// fragmentation is inside the baseline's margin.
inline constexpr int64_t kProcessBaselineBytes = int64_t{256} << 20;
inline constexpr int64_t kControlPlaneBytes = int64_t{32} << 20;
// What the gossip service's shared stranger budgets admit at once
// (MembershipOptions::all_strangers_quota's byte burst, 16 MiB, and
// joiners_quota's, 1 MiB: Note [Joiners' budget] in common/peer_quota.h).
inline constexpr int64_t kGossipStrangersBurstBytes = int64_t{17} << 20;

struct MemoryCeilingInputs {
  model::ModelConfig model;
  int samples_per_mb = 4;
  // Stages this node hosts (a joiner that has none yet: 1).
  int hosted_stages = 1;
  int memory_slots = 4;          // StageServerOptions::memory_slots
  int max_queued_forwards = 8;   // StageServerOptions::max_queued_forwards
  bool bf16_activations = false;
  // Borrowed; null: no shared stranger budgets are counted.
  const DaemonQuotas* quotas = nullptr;
  int64_t grpc_memory_quota_bytes = 0;
  // The server's sync-thread limit (NodeServerOptions::grpc_max_threads;
  // 0: none), which bounds the relay's handlers.
  int grpc_max_threads = 0;
  // RelayServiceOptions::max_attached of the relay this node serves (0:
  // none) and its max_circuits_per_node.
  int relay_slots = 0;
  int relay_circuits_per_node = RelayServiceOptions{}.max_circuits_per_node;
  int64_t baseline_bytes = kProcessBaselineBytes;
  int64_t control_plane_bytes = kControlPlaneBytes;
  int64_t gossip_strangers_bytes = kGossipStrangersBurstBytes;
};

struct MemoryCeiling {
  int64_t baseline_bytes = 0;  // baseline + control plane
  int64_t stage_bytes = 0;
  int64_t frame_bytes = 0;
  int64_t averaging_bytes = 0;
  int64_t state_bytes = 0;
  int64_t grpc_bytes = 0;
  int64_t stranger_bytes = 0;
  int64_t relay_bytes = 0;
  int64_t total_bytes = 0;
};

// Note [gRPC memory quota] (node/transport/node_server.h): the threads gRPC
// may start for the synchronous services' concurrent calls; far above what
// a swarm's members use (a few each), and calls blocked on a refusal hold
// are bounded per quota too (Note [Refusal hold]: max_held_calls).
inline constexpr int kDaemonGrpcMaxThreads = 512;

// REQUIRES: in.model.Validate().ok().
MemoryCeiling ComputeMemoryCeiling(const MemoryCeilingInputs& in);

// "memory ceiling: 612 MiB (baseline 288 MiB + stages ... + strangers ...)".
std::string DescribeMemoryCeiling(const MemoryCeiling& c);

// What a daemon does at start: computes its ceiling, logs it as
// "<name>: memory ceiling: ..." and sets skipswarm_memory_ceiling_bytes.
void AnnounceMemoryCeiling(const std::string& name, const MemoryCeilingInputs& in,
                           Metrics* metrics);

// The gRPC memory quota the daemons set on their server (Note [gRPC memory
// quota]): 16 frames of the model's largest payload, at least 128 MiB (a
// few streams' receive windows at full size).
int64_t GrpcMemoryQuotaBytes(const model::ModelConfig& model, int samples_per_mb);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_REPORTING_MEMORY_CEILING_H_
