// The production transport: one long-lived bidirectional
// PipelineService.Stream per peer, reused for every frame to it; frames go
// as a header and ≤ 1 MiB chunks and each gets one ack (proto/pipeline.proto).
//
//   GrpcTransportOptions opts;
//   opts.self = my_id;
//   opts.listen_address = "0.0.0.0:7420";   // port 0: pick one (tests)
//   opts.swarm_id = swarm_id;
//   SS_ASSIGN_OR_RETURN(opts.credentials, identity::PeerCredentials::Create(
//                                             {identity.get()}, clock->Now()));
//   SS_ASSIGN_OR_RETURN(auto transport, GrpcTransport::Create(opts, clock));
//   transport->SetFrameHandler(...);
//   transport->SetPeerAddress(peer, "10.0.0.7:7420");
//   transport->Send(peer, std::move(frame), done);
//
// Behaviour:
// - Connection reuse and keepalive: one channel per peer address (HTTP/2
//   keepalive pings from channel args) and one stream on it; a broken
//   stream fails its pending sends with UNAVAILABLE and raises one
//   peer-failure event; the next Send opens a new stream once the
//   reconnect back-off (doubling from initial_backoff to max_backoff, reset
//   by any ack) has passed; until then sends fail UNAVAILABLE at once.
// - Deadlines: a send that has no ack within header.deadline_ms (else
//   default_deadline) completes with DEADLINE_EXCEEDED; if it was still
//   queued, it is not written.
// - Back-pressure: at most max_queued_frames frames wait per peer (beyond:
//   RESOURCE_EXHAUSTED at once); one frame is written at a time, so gRPC's
//   HTTP/2 flow control paces the sender to the receiver's reads. The
//   receiver keeps reading while fewer than max_frames_awaiting_admission
//   frames of that stream wait for the handler's verdict, then pauses.
// - Receiving: the callback-API server validates every frame (Note [Frame
//   validation]) and passes it to the frame handler; gRPC's standard health
//   service (grpc.health.v1) answers SERVING.
// - Security (Note [Peer authentication], identity/tls_credentials.h):
//   mutual TLS with the nodes' Ed25519 certificates. A sender names itself
//   in stream metadata (ss-node-id); the server refuses a stream whose TLS
//   certificate is not that node's (UNAUTHENTICATED, logged; the server
//   keeps serving), and a sender's channel to peer P fails its handshake
//   unless the server there proves to be P (sends fail UNAVAILABLE).
//   Plain text only with PeerCredentials::Insecure() (--insecure).
//
// Thread rule: thread-safe; see transport.h. Handlers and `done` run on
// gRPC callback threads (or the clock's timer thread for deadlines and
// immediate failures). The clock must outlive the transport. The destructor
// cancels every stream, fails pending sends with UNAVAILABLE and waits for
// gRPC to finish with them; it must not run on a gRPC or clock callback.
#ifndef SKIPSWARM_NODE_TRANSPORT_GRPC_TRANSPORT_H_
#define SKIPSWARM_NODE_TRANSPORT_GRPC_TRANSPORT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/peer_quota.h"
#include "identity/tls_credentials.h"
#include "node/transport/frame_validator.h"
#include "node/transport/transport.h"

namespace grpc {
class ResourceQuota;
class ServerBuilder;
}  // namespace grpc

namespace skipswarm::node {

struct GrpcTransportOptions {
  // With TLS credentials, the id of their identity.
  PeerId self;
  // Required: TLS from the node's identity, or PeerCredentials::Insecure()
  // when the caller said --insecure (Create refuses null).
  std::shared_ptr<const identity::PeerCredentials> credentials;
  // "host:port" to serve on; port 0 picks a free port (see port()).
  // Empty: send only (no server).
  std::string listen_address = "127.0.0.1:0";
  // Set: the service registers on this builder (the daemon's one server,
  // node_server.h) instead of starting its own; listen_address is ignored,
  // port() is 0, SetServing is that server's, and its owner shuts it down
  // before destroying this transport.
  grpc::ServerBuilder* serve_on = nullptr;
  // Without serve_on: the quota the service's own server allocates from
  // (Note [gRPC memory quota] in node_server.h; one may be shared by
  // several servers); null: none.
  std::shared_ptr<grpc::ResourceQuota> resource_quota;
  // Frames must carry this swarm id (empty: accept any; tests only).
  std::string swarm_id;
  uint64_t max_payload_bytes = kMaxPayloadBytes;
  // ValidatorOptions::check_tensor_shape (Note [Frame validation] 1b).
  bool check_tensor_shape = false;
  size_t duplicate_window = 1 << 16;
  // Sending: frames waiting per peer beyond the one being written.
  size_t max_queued_frames_per_peer = 8;
  // Receiving: a stream stops reading while this many of its frames wait
  // for the frame handler's verdict (HTTP/2 flow control then holds the
  // sender back), so a node buffers at most this many frames per peer
  // beyond what its handler admitted.
  int max_frames_awaiting_admission = 4;
  absl::Duration default_deadline = absl::Seconds(30);
  absl::Duration keepalive_time = absl::Seconds(10);
  absl::Duration keepalive_timeout = absl::Seconds(5);
  // How long one connection attempt may take (gRPC's minimum connect
  // timeout); frame deadlines usually give up on a silent peer sooner.
  absl::Duration connect_timeout = absl::Seconds(5);
  // Stream re-open back-off after a failure (also gRPC's reconnect back-off).
  absl::Duration initial_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(5);
  // Note [Peer quotas] (common/peer_quota.h): every stream a peer opens
  // takes one of its stream slots and one message, every frame header its
  // payload_bytes and one message from its buckets; a refused stream ends
  // RESOURCE_EXHAUSTED; a refused frame is acked RESOURCE_EXHAUSTED and
  // then the stream ends RESOURCE_EXHAUSTED (nothing more is read from
  // it). Shared: the daemon classifies peers and reads the refusals. Null:
  // no quota.
  std::shared_ptr<common::PeerQuota> quota;
};

// Counters for tests and metrics.
struct GrpcTransportStats {
  int64_t streams_opened = 0;    // to peers (one per peer unless it broke)
  int64_t streams_accepted = 0;  // from peers
  // Frames received and refused (FrameValidator::rejected_by_reason).
  FrameRefusalCounts frames_refused = {};
};

class GrpcTransport final : public Transport {
 public:
  // Starts the server (if listen_address is set). `clock` is borrowed.
  static absl::StatusOr<std::unique_ptr<GrpcTransport>> Create(
      GrpcTransportOptions options, common::Clock* clock);
  ~GrpcTransport() override;

  // The port the server listens on (0 without a server).
  int port() const;
  // "127.0.0.1:<port>"-style address peers can reach on loopback.
  std::string loopback_address() const;
  GrpcTransportStats stats() const;
  // The standard gRPC health service's overall status (SERVING at start);
  // a paused data node reports NOT_SERVING (Note [Paused training] in
  // node/train/data_node_driver.h).
  void SetServing(bool serving);

  PeerId self() const override;
  void SetFrameHandler(FrameHandler handler) override;
  void SetPeerFailureHandler(PeerFailureHandler handler) override;
  void SetPeerAddress(const PeerId& peer, std::string address) override;
  void ForgetPeer(const PeerId& peer) override;
  void Send(const PeerId& to, Frame frame, SendDone done) override;

 private:
  class Impl;
  explicit GrpcTransport(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRANSPORT_GRPC_TRANSPORT_H_
