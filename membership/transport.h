// The narrow seam between SWIM membership and the network: three
// request/response calls of GossipService, sent to a peer address, answered
// asynchronously. Implementations: SimNetwork endpoints (sim_network.h:
// SimClock-driven latency, loss, partitions) and the gRPC adapter
// (grpc_gossip.h). Faults are added by wrapping a transport.
//
//   transport->Ping({"10.0.0.2:7000", peer_id}, request, absl::Seconds(0.2),
//                   [](absl::StatusOr<proto::Ack> ack) { ... });
//
// Contract for every implementation:
//  * `done` runs exactly once: with the reply, or with an error (Unavailable
//    when the peer cannot be reached, DeadlineExceeded after `timeout`,
//    whatever status the peer's handler answered, Unauthenticated when the
//    peer is not who `to.id` says).
//  * `done` never runs inside the call that started it, and never with a
//    transport lock held, so it may call the transport again.
//  * Incoming requests reach the GossipHandler given to the implementation;
//    the handler replies through its `reply` callback, exactly once, from
//    any thread, possibly later (PingReq waits for its own probe).
//
// Thread rule: implementations are thread-safe unless they say otherwise.
#ifndef SKIPSWARM_MEMBERSHIP_TRANSPORT_H_
#define SKIPSWARM_MEMBERSHIP_TRANSPORT_H_

#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/node_id.h"
#include "proto/gossip.pb.h"

namespace skipswarm::membership {

// Where a request goes. `id` is zero when unknown (a bootstrap address);
// otherwise an authenticating transport checks the peer proves it.
struct PeerRef {
  std::string address;
  common::NodeId id;
};

// Who sent an incoming request, as far as the transport can tell.
struct PeerInfo {
  std::string address;  // remote address as seen by the transport
  // The id proven by the transport (mutual TLS: hash of the certificate's
  // key); zero when the transport cannot authenticate (insecure mode).
  common::NodeId authenticated_id;
};

using AckCallback = absl::AnyInvocable<void(absl::StatusOr<proto::Ack>)>;
using PushPullCallback =
    absl::AnyInvocable<void(absl::StatusOr<proto::PushPullResponse>)>;

class GossipHandler {
 public:
  virtual ~GossipHandler() = default;
  virtual void HandlePing(const PeerInfo& from, const proto::PingRequest& req,
                          AckCallback reply) = 0;
  virtual void HandlePingReq(const PeerInfo& from,
                             const proto::PingRequest& req,
                             AckCallback reply) = 0;
  virtual void HandlePushPull(const PeerInfo& from,
                              const proto::PushPullRequest& req,
                              PushPullCallback reply) = 0;
};

class GossipTransport {
 public:
  virtual ~GossipTransport() = default;
  virtual void Ping(const PeerRef& to, const proto::PingRequest& req,
                    absl::Duration timeout, AckCallback done) = 0;
  // Asks `to` to probe `req.target` on our behalf.
  virtual void PingReq(const PeerRef& to, const proto::PingRequest& req,
                       absl::Duration timeout, AckCallback done) = 0;
  virtual void PushPull(const PeerRef& to, const proto::PushPullRequest& req,
                        absl::Duration timeout, PushPullCallback done) = 0;
};

}  // namespace skipswarm::membership

#endif  // SKIPSWARM_MEMBERSHIP_TRANSPORT_H_
