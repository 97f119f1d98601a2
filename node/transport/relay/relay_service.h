// RelayService: the relay's side of relayed connections (README.md). Every
// reachable daemon serves it on its one port; an outbound-only node keeps an
// Attach stream open to it, and peers reach that node by opening Connect
// here. The service pairs each Connect with the attached node's Accept
// and copies the bytes between the two streams (opaque: the two ends run
// their own TLS inside).
//
//   RelayServiceOptions ro;  ro.self = id;  ro.credentials = creds;
//   RelayService relay(ro);
//   server.builder()->RegisterService(&relay);   // node_server.h
//   ...
//   relay.Shutdown();   // before the server's Shutdown: ends Attach streams
//
// Admission: callers are authenticated (TLS certificate = claimed id, Note
// [Peer authentication]); at most max_attached nodes attach (beyond:
// RESOURCE_EXHAUSTED, the node tries another relay) and each has at most
// max_circuits_per_node open circuits, max_attached x
// max_circuits_per_node in all. Only the attached node itself may
// Accept its circuits.
//
// Per-sender budgets (options.quota, the daemon's "relay" PeerQuota): each
// caller's concurrent circuits are its streams (beyond: RESOURCE_EXHAUSTED),
// and the bytes each side of a circuit sends are paced (Note [Paced bytes]
// in common/peer_quota.h) on its sender's key: a Connect stream's on its
// caller's, an Accept stream's on the attached node's (Note [Relay
// directions]). Each message is charged before it is forwarded, and a
// sender over its byte budget is not read from until its bucket has
// refilled, so one peer cannot take the relay's link and CPU from the
// others' circuits in either direction. A sender whose wait would exceed
// max_pace (messages far over its burst, or many circuits at once) has
// that circuit ended with RESOURCE_EXHAUSTED.
//
// Messages: an opening (an Attach request, a Connect's or Accept's first
// message) of more than kRelayMaxOpeningBytes is refused
// (INVALID_ARGUMENT), and so is a circuit message of more than
// kRelayMaxMessageBytes (the circuit ends), so what the relay holds is
// bounded (Note [Relay memory], RelayHeldBytesBound).
//
// Thread rule: thread-safe. Every handler runs on a gRPC sync-server
// thread and blocks it for the stream's life (a circuit holds two
// threads); the service holds no lock while it reads or writes a stream.
#ifndef SKIPSWARM_NODE_TRANSPORT_RELAY_RELAY_SERVICE_H_
#define SKIPSWARM_NODE_TRANSPORT_RELAY_RELAY_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/node_id.h"
#include "common/peer_quota.h"
#include "identity/tls_credentials.h"
#include "node/transport/relay/relay.grpc.pb.h"
#include "node/transport/relay/splice.h"

namespace skipswarm::node {

// The largest opening the relay takes: an Attach request, or a Connect's
// or Accept's first message (a version, two ids, a circuit: under 100
// bytes when honest).
inline constexpr size_t kRelayMaxOpeningBytes = 1 << 10;
// The largest circuit message the relay forwards: what Splice writes (at
// most kSpliceChunkBytes of data) with room for the other fields.
inline constexpr size_t kRelayMaxMessageBytes = kSpliceChunkBytes + kRelayMaxOpeningBytes;

// Note [Relay memory]
// What a RelayService holds at once, whatever its peers send, with
// A = max_attached, C = max_circuits_per_node and T = the server's
// sync-thread limit (Note [gRPC memory quota]; 0: none):
// * Circuits: at most A C open at once (waiting for their Accept or
//   spliced; beyond, Connect is refused RESOURCE_EXHAUSTED), at most C per
//   target, each counted until both its handlers let go of it whether or
//   not its target is still attached (a target that detaches and attaches
//   again, or another node in its slot, adds none); and each has a
//   Connect handler on a thread of its own, so at most T. Handlers of
//   circuits: at most 2 A C, and at most T.
// * Per such handler, one message at a time: the one it read, held while
//   its sender is paced (at most max_pace) and while it is written, plus
//   the copy gRPC serializes for that write, which lives until the write
//   completes (the receiver's flow control may hold it): 2 x
//   kRelayMaxMessageBytes. A larger message ends the circuit as soon as
//   it is read; the copying loop's message is freed before the handler
//   waits for its circuit's other one. The Connect handler also keeps its
//   opening (at most kRelayMaxOpeningBytes) for the circuit's life.
// * Per circuit, its state and at most two calls announcing it (one
//   queued on its target's attachment, one in the batch the Attach
//   handler is writing): a call leaves the queue when its Connect gives up
//   waiting, so a target that does not read its Attach stream queues at
//   most C calls, not one per Connect ever made (kRelayCircuitStateBytes).
// * Per attachment, its state and its Attach request (at most
//   kRelayMaxOpeningBytes; kRelayAttachmentStateBytes). A re-attach ends
//   the stream it replaces, so a node that attaches again and again while
//   reading none of its streams keeps one Attach handler, not one blocked
//   writer (and its batch of calls) per attach.
// Not counted, as on every service: the message a refused call holds
// while it is refused (any call's first message, or an oversized one, read
// by gRPC before the relay sees its size, at most the server's receive
// limit, and freed as the handler returns), gRPC's own per-call state,
// and the handler threads' stacks.
inline constexpr int64_t kRelayCircuitStateBytes = 1 << 10;
inline constexpr int64_t kRelayAttachmentStateBytes = 2 << 10;
// The bound of Note [Relay memory]: min(2 A C, T) handlers x (2 x
// kRelayMaxMessageBytes + kRelayMaxOpeningBytes) + min(A C, T) circuits x
// kRelayCircuitStateBytes + A x kRelayAttachmentStateBytes. 0 when A is 0
// (no relay). `max_threads` 0: no thread limit.
int64_t RelayHeldBytesBound(int max_attached, int max_circuits_per_node, int max_threads);

struct RelayServiceOptions {
  common::NodeId self;
  // TLS from the node's key, or PeerCredentials::Insecure() (--insecure).
  std::shared_ptr<const identity::PeerCredentials> credentials;
  std::string swarm_id;  // empty: any (tests)
  int max_attached = 16;
  int max_circuits_per_node = 64;
  // How long a Connect waits for the attached node's Accept.
  absl::Duration accept_timeout = absl::Seconds(5);
  // Heartbeats on Attach streams (the node declares a silent relay lost).
  absl::Duration heartbeat = absl::Milliseconds(500);
  // Per-caller circuits and per-sender bytes (above); null: unbounded.
  // `clock` runs the pacing waits: the quota's own clock, which must
  // outlive the service (required with a quota).
  std::shared_ptr<common::PeerQuota> quota;
  common::Clock* clock = nullptr;
  // The longest either side's copy is paused for one message; a longer
  // wait ends its circuit (RESOURCE_EXHAUSTED).
  absl::Duration max_pace = absl::Seconds(5);
  // Called (no lock held, on the circuit's handler thread) each time a
  // side's copy is paused, with its sender (the caller, or the attached
  // node) and the pause; for tests and logs. Optional.
  std::function<void(const common::NodeId& sender, absl::Duration wait)> on_paced;
};

struct RelayServiceStats {
  int attached = 0;             // nodes attached now
  int64_t circuits_opened = 0;  // spliced circuits, ever
  int64_t bytes_relayed = 0;    // both directions
  int64_t paced = 0;            // pauses of either side's copy (Note [Paced bytes])
  int64_t over_budget = 0;      // circuits ended for a wait over max_pace
  int64_t oversized = 0;        // openings and messages refused for their size
  int queued_calls = 0;         // calls waiting on attachments' queues now
  int attach_handlers = 0;      // Attach calls being served now (replaced ones too)
};

// Note [Relay directions]
// * A circuit carries bytes both ways, and each direction is its sender's:
//   the caller's requests on its Connect stream, the attached node's
//   answers on its Accept stream. Pacing only the callers bounded one
//   direction: a node that attached here and an accomplice that opened
//   circuits to it (each within its caller budget, sending almost nothing)
//   could push the attached node's "answers" through the relay at the
//   link's speed, taking its bandwidth and CPU from every honest circuit.
// * So both sides are paced alike, each on its own sender's key of the
//   one quota: same Pace, same max_pace end, same counters. An attached
//   node's key is the one it calls with, so its answers (summed over every
//   circuit it holds here) and its own circuits through this relay share
//   one bucket of its class (member, newcomer or stranger, as the quota's
//   classifier says: attaching is not membership). The daemon's budgets
//   cover that sum (Note [Relay budgets] in
//   node/daemon/reporting/daemon_quotas.h).
// * The circuit slots stay the caller's: an Accept answers a circuit that
//   a caller's slot already holds, so it takes none.
// * A node whose record the relay has yet to learn (a member that
//   restarted, a new one) is a stranger to the classifier, its answers
//   included, until gossip brings the record. Kept so after measuring it
//   (README.md, "A node the relay does not know yet"): Pace classifies
//   every message, so the circuits it already holds are paced as a
//   member's from the record's arrival on; until then each of its
//   circuits has at most one message in debt, which a stranger's rate
//   pays back within max_pace (Note [Relay budgets]), so its own bucket
//   slows it but ends no circuit. What can end one is the budget of all
//   strangers held by others (a flood), as for any joiner. Charging its
//   answers to the caller instead would let a stranger that members call
//   answer on the members' budgets; presenting its signed record at
//   Attach would lift the stranger class without that.

class RelayService final : public proto::Relay::Service {
 public:
  explicit RelayService(RelayServiceOptions options);
  ~RelayService() override;

  grpc::Status Attach(grpc::ServerContext* context, const proto::RelayAttachRequest* request,
                      grpc::ServerWriter<proto::RelayCall>* writer) override;
  grpc::Status Connect(grpc::ServerContext* context,
                       grpc::ServerReaderWriter<proto::RelayBytes, proto::RelayBytes>* stream)
      override;
  grpc::Status Accept(grpc::ServerContext* context,
                      grpc::ServerReaderWriter<proto::RelayBytes, proto::RelayBytes>* stream)
      override;

  RelayServiceStats stats() const;
  // Ends every Attach stream and refuses new ones; circuits end with the
  // server's own shutdown. Idempotent.
  void Shutdown();

 private:
  using BytesStream = grpc::ServerReaderWriter<proto::RelayBytes, proto::RelayBytes>;
  struct Attachment {
    uint64_t generation = 0;
    std::deque<proto::RelayCall> calls;
    // The Attach call of this generation; valid while the entry is (its
    // handler erases the entry before it returns, or a re-attach replaces
    // it).
    grpc::ServerContext* context = nullptr;
  };
  struct Circuit {
    common::NodeId caller;
    common::NodeId target;
    grpc::ServerContext* connect_context = nullptr;
    BytesStream* connect = nullptr;
    grpc::ServerContext* accept_context = nullptr;
    BytesStream* accept = nullptr;
    bool connect_done = false;
    bool accept_done = false;
    bool connect_refused = false;  // its handler answers with a refusal
    bool accept_refused = false;
    int left = 0;  // handlers past their pump
  };

  // The caller's node id: its TLS certificate's, which must equal `claimed`
  // (with plain text: `claimed` as given).
  absl::StatusOr<common::NodeId> Caller(grpc::ServerContext* context,
                                        const std::string& claimed) const;
  // A Connect's or Accept's first message (read into `first`, its protocol
  // version checked) and its sender, as Caller checks it.
  absl::StatusOr<common::NodeId> ReadOpening(grpc::ServerContext* context, BytesStream* stream,
                                             proto::RelayBytes* first);
  // Copies circuit `id`'s bytes from this side's stream to the other's
  // until either ends, then ends both calls and waits for the other
  // handler to let go of the streams. Both sides' bytes are paced, each
  // on its sender's key (Note [Relay directions]); the status is the
  // handler's answer.
  grpc::Status Pump(uint64_t id, bool connect_side);
  // OK when a circuit to `target` may open: it is attached, and neither
  // all circuits nor its own are at their most (Note [Relay memory]).
  absl::Status AdmitCircuit(const common::NodeId& target) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Erases circuit `id`: its target's count, its call if still queued.
  void ForgetCircuit(uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Pump's copying loop: until `from` ends, `to` fails or a message is
  // refused (its size, or its sender's pace: the status). Its message is
  // freed when it returns (Note [Relay memory]).
  grpc::Status Copy(BytesStream* from, BytesStream* to, const common::NodeId& sender,
                    grpc::ServerContext* context);
  // Charges `bytes` from `sender` and waits out its pause on the clock
  // (ends early when `context` is cancelled). OK to forward the message;
  // else the circuit ends with the status.
  absl::Status PaceSender(const common::NodeId& sender, size_t bytes,
                          grpc::ServerContext* context);

  const RelayServiceOptions options_;
  mutable absl::Mutex mu_;
  absl::CondVar cv_;  // attachments' calls, accepts, circuit ends, shutdown
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_generation_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_circuit_ ABSL_GUARDED_BY(mu_) = 0;
  absl::node_hash_map<common::NodeId, Attachment> attached_ ABSL_GUARDED_BY(mu_);
  // node_hash_map: handlers keep references to their circuit across waits.
  absl::node_hash_map<uint64_t, Circuit> circuits_ ABSL_GUARDED_BY(mu_);
  // Open circuits (waiting or spliced) per target, attached or not.
  absl::flat_hash_map<common::NodeId, int> target_circuits_ ABSL_GUARDED_BY(mu_);
  int64_t circuits_opened_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<int64_t> bytes_relayed_{0};
  std::atomic<int64_t> paced_{0};
  std::atomic<int64_t> over_budget_{0};
  std::atomic<int64_t> oversized_{0};
  std::atomic<int> attach_handlers_{0};
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRANSPORT_RELAY_RELAY_SERVICE_H_
