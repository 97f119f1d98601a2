// State transfer to a joining replica (docs/DESIGN.md §4
// StateTransferService.FetchState; §5 "Allocation"): weights AND optimiser state
// of one stage, as the stage's checkpoint bytes, chunked (<= 1 MiB), every
// chunk with its CRC-32C and the SHA-256 of the whole, resumable from a
// byte offset.
//
// Source side (every daemon runs one StateServer, advertised as the
// record's 4th address, Note [Daemon records] in training_members.h):
//
//   auto server = *StateServer::Create(options, [&](int stage) {
//     return SnapshotOf(stage);     // checkpoint bytes; between iterations
//   });
//   server->OnBoundary(next_iteration, digests);  // every boundary
//
// Note [Boundary snapshots]: a joiner asks for the state at the start of
// iteration e (its entry iteration, Note [Entry iteration]). A request for
// a boundary this source has not reached yet is remembered and the call
// waits; when the source reaches boundary e (its previous update done, no
// task running) it snapshots the stage once and serves every waiter and
// every later resume from the cached bytes. A request for a boundary the
// source has already passed without a snapshot fails FAILED_PRECONDITION
// (the joiner picks another replica or a later entry), unless it is the
// boundary the source is at and its update has not run (Note [Snapshot in
// the iteration]). Snapshots of the
// same stage at the same boundary are byte-identical on every replica (the
// replicas are bit-identical), so a transfer cut off at one replica
// resumes at another when the SHA-256 matches.
//
// Note [Snapshot in the iteration]: a source whose owner sets
// StateServerOptions::in_iteration serves a request for the boundary it is
// at (at_boundary_ == e, no snapshot taken at it) with a snapshot taken
// then: a stage's weights, optimiser state and step change only in its
// update at the iteration's end, so until that update the stage still
// holds its state of boundary e. The function answers FAILED_PRECONDITION
// once the update ran (the stage's step is past e), and the request fails
// as before. A member hosting several stages restores an orphaned one at
// the iteration the swarm is paused in (Note [Restore from peer copies] in
// gossip_daemon_restore.cc) and needs its other stages' state at that same
// boundary, which their replicas passed when they began the paused
// iteration; no other boundary comes while the swarm waits for it. The
// snapshot is cached like one taken at the boundary.
//
// Joiner side:
//
//   FetchOptions o{.stage = 2, .iteration = e, ...};
//   SS_ASSIGN_OR_RETURN(FetchedState st, FetchStageState({addr_a, addr_b}, o));
//   compute->LoadCheckpoint(write st.bytes to a file);
//
// What the joiner checks of each chunk a source streams: Note [Receiving
// state chunks] in state_chunks.h.
//
// Thread rule: StateServer is thread-safe; its gRPC handlers run on gRPC's
// threads and the snapshot function runs on the OnBoundary caller's thread.
// FetchStageState blocks its caller.
#ifndef SKIPSWARM_NODE_DAEMON_GOSSIP_STATE_TRANSFER_H_
#define SKIPSWARM_NODE_DAEMON_GOSSIP_STATE_TRANSFER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/node_id.h"
#include "common/peer_quota.h"
#include "identity/tls_credentials.h"

namespace grpc {
class Channel;
class ServerBuilder;
}  // namespace grpc

namespace skipswarm::node {

struct StageSnapshot {
  std::string bytes;           // the stage's checkpoint (weights + optimiser + step)
  uint64_t params_digest = 0;  // StageCompute::ParamsDigest at the snapshot
};

// A replica to fetch from: its state address and, when known, its node id
// (with TLS the handshake then fails unless the server proves to be it).
struct StateSource {
  StateSource() = default;
  StateSource(std::string a, common::NodeId i = common::NodeId())  // NOLINT: implicit
      : address(std::move(a)), id(i) {}
  std::string address;
  common::NodeId id;
};

struct StateServerOptions {
  common::NodeId self;
  // Note [Peer authentication] (identity/tls_credentials.h): with TLS a
  // request whose `from` is not the caller's certificate is refused
  // UNAUTHENTICATED. Null: plain text (tests, --insecure).
  std::shared_ptr<const identity::PeerCredentials> credentials;
  std::string listen_address = "127.0.0.1:0";
  // Set: the service registers on this builder (the daemon's one server,
  // node/transport/node_server.h) instead of starting its own;
  // listen_address is ignored, port() is 0, and the server's owner shuts it
  // down before destroying this.
  grpc::ServerBuilder* serve_on = nullptr;
  std::string swarm_id;
  size_t chunk_bytes = size_t{1} << 20;
  // How long a request may wait for its boundary.
  absl::Duration max_wait = absl::Seconds(60);
  // Snapshots kept (oldest dropped first).
  int max_snapshots = 4;
  // Fault injection for tests: the first transfer that reaches this many
  // chunks is cut off (the stream ends with UNAVAILABLE). 0: never.
  int cut_first_stream_after_chunks = 0;
  // Fault injection for tests: the first this many requests for a hosted
  // stage's state end UNAVAILABLE before a byte is sent, as from a source
  // that dies or stops serving (Note [Join retries] in
  // gossip_daemon_join.cc). 0: never.
  int fail_first_transfers = 0;
  // Note [Peer quotas] (common/peer_quota.h); null: none. A request holds
  // one of its sender's stream slots while it waits and is served, and
  // charges one message, then the snapshot's bytes; refused:
  // RESOURCE_EXHAUSTED. Shared with the daemon (classifier, metrics).
  std::shared_ptr<common::PeerQuota> quota;
  // Note [Snapshot in the iteration]: the stage's state at boundary
  // `boundary`, taken while this node is in that iteration (on a gRPC
  // thread, concurrently with the iteration's tasks); FAILED_PRECONDITION
  // once its update ran. Null: such a request fails FAILED_PRECONDITION.
  std::function<absl::StatusOr<StageSnapshot>(int stage, uint64_t boundary)> in_iteration;
};

class StateServer {
 public:
  using SnapshotFn = std::function<absl::StatusOr<StageSnapshot>(int stage)>;

  static absl::StatusOr<std::unique_ptr<StateServer>> Create(const StateServerOptions& options,
                                                             SnapshotFn snapshot);
  ~StateServer();

  int port() const;
  // This node is at the boundary before `next_iteration` (no task running):
  // takes the snapshots waiting requests want for this boundary, answers
  // requests for passed boundaries, and publishes `digests` (per hosted
  // stage; 0: none taken, Note [Digest on demand] in
  // node/train/node_trainer.h) and the iteration in Health.
  void OnBoundary(uint64_t next_iteration, const std::map<int, uint64_t>& digests);
  // Requests waiting for a boundary now.
  int waiting() const;
  // Stops serving; waiting requests fail UNAVAILABLE.
  void Shutdown();
  // Note [Checkpoint copies] (checkpoint_copies.h). A hosted stage's state
  // at boundary `iteration` (its checkpoint), served to requests for that
  // boundary even after it has passed (kept like other snapshots).
  void Publish(int stage, uint64_t iteration, StageSnapshot snapshot);
  // A copy of another node's stage at `iteration`, served to any request
  // for (stage, iteration) and listed in Health; the newest `keep` per
  // stage are kept.
  void HoldCopy(int stage, uint64_t iteration, StageSnapshot snapshot, int keep);
  // (stage, iteration) of every copy held, ascending.
  std::vector<std::pair<int, uint64_t>> HeldCopies() const;

  class Impl;

 private:
  explicit StateServer(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

struct FetchOptions {
  common::NodeId self;
  std::shared_ptr<const identity::PeerCredentials> credentials;  // null: plain text
  std::string swarm_id;
  int stage = 0;
  uint64_t iteration = 0;  // the boundary wanted (Note [Boundary snapshots])
  // For the whole transfer from one source (including the wait for its
  // boundary).
  absl::Duration deadline = absl::Seconds(60);
  // > 0: a source whose snapshot claims more bytes is refused at its first
  // chunk (RESOURCE_EXHAUSTED; the next source is tried) before anything is
  // held. The daemons pass StateBytesBound of the stage's parameters.
  uint64_t max_bytes = 0;
  // Resumes at the same source after a broken stream before moving on.
  int resumes_per_source = 2;
  // Called (on the caller's thread) when the first chunk arrives: the
  // source reached the boundary and the bytes start to flow.
  std::function<void()> on_first_chunk;
  // Polled (from another thread, every 50 ms) while a call waits or
  // streams: true ends the fetch at once with CANCELLED (a signal stopping
  // a joiner, Note [Stopping while joining] in gossip_daemon_join.cc).
  // Unset: never.
  std::function<bool()> cancelled;
};

struct FetchedState {
  std::string bytes;
  uint64_t params_digest = 0;
  std::string source;       // the address that completed the transfer
  int streams = 0;          // FetchState calls made (1 = no resume)
  int sources_tried = 0;
};

// The most bytes a stage's snapshot of `num_params` parameters can hold:
// weights, two AdamW moments and (Note [Outer steps] in node_trainer.h)
// anchor, outer momentum and residual in float32, plus names and shapes
// (1 MiB); the same bound as a replica re-sync's (GrpcGroupComm).
inline uint64_t StateBytesBound(uint64_t num_params) {
  return 7 * num_params * sizeof(float) + (uint64_t{1} << 20);
}

// Tries `sources` in order; each chunk's CRC-32C and the whole's SHA-256
// are checked. UNAVAILABLE naming every source's error when none delivered;
// FAILED_PRECONDITION when every source had passed the boundary already
// (the caller needs a later one); CANCELLED once `options.cancelled` said so.
absl::StatusOr<FetchedState> FetchStageState(const std::vector<StateSource>& sources,
                                             const FetchOptions& options);

// The iteration the StateServer at `address` is in (Health), for choosing
// an entry iteration.
absl::StatusOr<uint64_t> QuerySourceIteration(
    const StateSource& source,
    const std::shared_ptr<const identity::PeerCredentials>& credentials,
    absl::Duration deadline);

// Note [Health channels]: the behind check (behind_check.h) asks the same
// few members for their iteration once a second. QuerySourceIteration makes
// a channel per query: a TCP connection and the HTTP/2 (and TLS) handshake
// at both ends, then a teardown, for one small call; ~32 connections a
// second in the default 12-node local swarm. HealthChannels keeps one
// channel per (address, id) while its queries succeed. A failed query drops
// its channel, so the next query to that member dials afresh as one of
// QuerySourceIteration does: a revived member is not hidden behind a kept
// channel's reconnect back-off. New credentials drop every channel; past
// kMaxChannels members all are dropped (a check asks a handful). Answers
// are QuerySourceIteration's. Not thread-safe: one caller (the daemon's
// main loop).
class HealthChannels {
 public:
  static constexpr size_t kMaxChannels = 16;
  HealthChannels();
  ~HealthChannels();
  absl::StatusOr<uint64_t> QueryIteration(
      const StateSource& source,
      const std::shared_ptr<const identity::PeerCredentials>& credentials,
      absl::Duration deadline);
  size_t channels() const { return channels_.size(); }

 private:
  std::shared_ptr<const identity::PeerCredentials> credentials_;
  std::map<std::pair<std::string, common::NodeId>, std::shared_ptr<grpc::Channel>> channels_;
};

// The checkpoint copies the StateServer at `source` holds (Health):
// (stage, iteration) pairs; empty from a node that holds none.
absl::StatusOr<std::vector<std::pair<int, uint64_t>>> QueryHeldCopies(
    const StateSource& source,
    const std::shared_ptr<const identity::PeerCredentials>& credentials,
    absl::Duration deadline);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_GOSSIP_STATE_TRANSFER_H_
