// The two client sides of relayed connections (README.md, relay.proto):
//
// RelayAttacher runs on an outbound-only node (behind NAT). It keeps Attach
// streams open to `relays` relays, chosen best first from a candidate list
// the caller supplies (the daemon: reachable live members, lowest RTT
// first), and answers each circuit a relay announces with an Accept stream
// spliced to a fresh TCP connection to this node's own server. A relay that
// breaks its stream or stays silent for silence_timeout is replaced by the
// next candidate; `changed` hears the new set (to re-sign the node's record)
// and how long the node had fewer relays than wanted.
//
// RelayDialer runs on every node. EndpointFor(N) gives a loopback address
// that stands for outbound-only node N: each TCP connection made to it is
// carried to N through one of N's relays (tried in the order relays_of(N)
// gives them), so gRPC channels, TLS and every service work unchanged; the
// caller only dials that address instead of N's unreachable one.
//
//   RelayAttacher attacher(opts, clock, candidates, [&](const RelayChange& c) {
//     membership->UpdateLocalRecord(... c.relays ...);
//   });
//   RelayDialer dialer(dopts, [&](const NodeId& n) { return RelaysFromView(n); });
//   transport->SetPeerAddress(n, *dialer.EndpointFor(n));
//
// Thread rule: both are thread-safe. Each runs threads of its own (a
// manager, one per attachment or listener, two per circuit); callbacks run
// on the manager thread with no lock held. The destructors stop and join
// every thread; the clock and credentials must outlive the objects.
#ifndef SKIPSWARM_NODE_TRANSPORT_RELAY_RELAY_CLIENT_H_
#define SKIPSWARM_NODE_TRANSPORT_RELAY_RELAY_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/node_id.h"
#include "identity/tls_credentials.h"
#include "node/transport/relay/relay.grpc.pb.h"
#include "node/transport/relay/worker_threads.h"

namespace skipswarm::node {

struct RelayCandidate {
  common::NodeId id;
  std::string address;  // its one port, "host:port"
};

// Channels to relays, one per (address, relay id), kept for the owner's life
// (gRPC 1.51 must not destroy a channel's last reference on its own
// threads; keeping them sidesteps that). Thread-safe.
class RelayChannels {
 public:
  explicit RelayChannels(std::shared_ptr<const identity::PeerCredentials> credentials);
  std::shared_ptr<grpc::Channel> Get(const RelayCandidate& relay);

 private:
  const std::shared_ptr<const identity::PeerCredentials> credentials_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<grpc::Channel>> channels_ ABSL_GUARDED_BY(mu_);
};

struct RelayAttacherOptions {
  common::NodeId self;
  std::shared_ptr<const identity::PeerCredentials> credentials;
  std::string swarm_id;
  // This node's own server ("host:port"), dialed for every circuit.
  std::string local_address;
  int relays = 2;
  // No heartbeat for this long: the relay is lost (its heartbeat is 0.5 s).
  absl::Duration silence_timeout = absl::Seconds(2);
  // A relay that failed is not tried again for this long (unless no other
  // candidate is left).
  absl::Duration retry_after = absl::Seconds(10);
  absl::Duration tick = absl::Milliseconds(100);
};

struct RelayChange {
  std::vector<RelayCandidate> relays;  // attached now, in attach order
  // Set when this change ends a time with fewer relays than wanted after a
  // loss: how long that lasted.
  std::optional<absl::Duration> recovered_after;
  std::string detail;  // one line for the log
};

struct RelayAttacherStats {
  int attached = 0;
  int64_t circuits = 0;
  int64_t losses = 0;
  std::optional<absl::Duration> last_recovery;
};

class RelayAttacher {
 public:
  using Candidates = std::function<std::vector<RelayCandidate>()>;
  using Changed = std::function<void(const RelayChange&)>;
  // Starts attaching at once. `clock` is borrowed.
  RelayAttacher(RelayAttacherOptions options, common::Clock* clock, Candidates candidates,
                Changed changed);
  ~RelayAttacher();
  RelayAttacher(const RelayAttacher&) = delete;
  RelayAttacher& operator=(const RelayAttacher&) = delete;

  RelayAttacherStats stats() const;

 private:
  struct Attachment;
  void Manage();
  void RunAttachment(std::shared_ptr<Attachment> a);
  void RunCircuit(std::shared_ptr<Attachment> a, uint64_t circuit);

  const RelayAttacherOptions options_;
  common::Clock* const clock_;
  const Candidates candidates_;
  const Changed changed_;
  RelayChannels channels_;
  WorkerThreads workers_;
  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::shared_ptr<Attachment>> attachments_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<common::NodeId, absl::Duration> failed_at_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, grpc::ClientContext*> circuit_contexts_ ABSL_GUARDED_BY(mu_);
  uint64_t next_circuit_key_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<absl::Duration> short_since_ ABSL_GUARDED_BY(mu_);
  RelayAttacherStats stats_ ABSL_GUARDED_BY(mu_);
  std::thread manager_;
};

struct RelayDialerOptions {
  common::NodeId self;
  std::shared_ptr<const identity::PeerCredentials> credentials;
  // How long to wait for a connection to one relay before trying the next.
  absl::Duration connect_timeout = absl::Seconds(2);
};

struct RelayDialerStats {
  int64_t circuits = 0;  // connections carried
  int64_t failed = 0;    // connections no relay took
};

class RelayDialer {
 public:
  // Best first; empty when the target has none (its connections fail).
  using RelaysOf = std::function<std::vector<RelayCandidate>(const common::NodeId& target)>;
  RelayDialer(RelayDialerOptions options, RelaysOf relays_of);
  ~RelayDialer();
  RelayDialer(const RelayDialer&) = delete;
  RelayDialer& operator=(const RelayDialer&) = delete;

  // "127.0.0.1:PORT", the same for `target` for the dialer's life.
  absl::StatusOr<std::string> EndpointFor(const common::NodeId& target);
  RelayDialerStats stats() const;

 private:
  void AcceptLoop(common::NodeId target, int listen_fd);
  void Carry(const common::NodeId& target, int fd);

  const RelayDialerOptions options_;
  const RelaysOf relays_of_;
  RelayChannels channels_;
  WorkerThreads workers_;
  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<common::NodeId, std::pair<int, std::string>> endpoints_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, grpc::ClientContext*> contexts_ ABSL_GUARDED_BY(mu_);
  uint64_t next_key_ ABSL_GUARDED_BY(mu_) = 0;
  RelayDialerStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRANSPORT_RELAY_RELAY_CLIENT_H_
