// GossipService over gRPC: a server that hands incoming calls to a
// GossipHandler (a Membership), and a GossipTransport client. Mutual TLS
// with each node's self-signed Ed25519 certificate (identity.h): both sides
// present a certificate, neither checks it against a CA; instead the hash
// of the peer certificate's key IS the peer's node id, and it must equal the
// id the peer claims (the `from` of every request and reply, and the id the
// caller expected). Plain text only with `insecure` (local tests).
//
//   auto server = *GrpcGossipServer::Start("[::]:0", membership.get(),
//                                          GrpcSecurity{identity.get()});
//   GrpcGossipTransport transport(GrpcSecurity{identity.get()}, clock);
//   transport.Ping({"10.0.0.2:7000", peer_id}, req, absl::Seconds(1), done);
//
// Errors from the client carry the step that failed, for bootstrap
// diagnostics (DiagnoseGossipError in bootstrap_diagnostics.h).
//
// Connection setup is not the peer being slow: a call on a channel that is
// not connected yet (first contact, or after the peer went away) gets at
// least kConnectBudget instead of `timeout`, because TCP + the TLS handshake
// on a loaded machine can take longer than a 120 ms probe timeout, and a
// probe lost to it made SWIM suspect a healthy member (the false DEADs of a
// loaded 12-node loopback start, membership/README.md). A refused
// connection still fails at once; calls on a connected channel keep
// `timeout`.
//
// Thread rule: thread-safe. Client callbacks and handler calls run on gRPC
// threads. Shut the server down before destroying its handler; destroy the
// transport only after every `done` has run (the destructor waits).
#ifndef SKIPSWARM_MEMBERSHIP_GRPC_GOSSIP_H_
#define SKIPSWARM_MEMBERSHIP_GRPC_GOSSIP_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "identity/identity.h"
#include "identity/tls_credentials.h"
#include "membership/transport.h"
#include "proto/gossip.grpc.pb.h"

namespace skipswarm::membership {

class GrpcGossipServer {
 public:
  // Listens on `address` ("host:port", port 0 picks one). `handler` must
  // outlive the server (or Shutdown).
  static absl::StatusOr<std::unique_ptr<GrpcGossipServer>> Start(
      const std::string& address, GossipHandler* handler,
      const identity::GrpcSecurity& security, absl::Time now);
  // Registers the service on `builder` (a daemon's one server,
  // node/transport/node_server.h) instead of listening itself: port() is 0,
  // Shutdown does nothing, and the builder's server must be shut down
  // before this is destroyed. The credentials are that server's.
  static std::unique_ptr<GrpcGossipServer> Register(grpc::ServerBuilder* builder,
                                                    GossipHandler* handler,
                                                    const identity::GrpcSecurity& security);
  ~GrpcGossipServer();

  int port() const { return port_; }
  // Stops accepting calls and waits for running ones. Idempotent.
  void Shutdown();

 private:
  class Service;
  GrpcGossipServer() = default;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

class GrpcGossipTransport final : public GossipTransport {
 public:
  static constexpr absl::Duration kConnectBudget = absl::Seconds(1);

  // `clock` (deadlines) must outlive the transport.
  GrpcGossipTransport(identity::GrpcSecurity security, common::Clock* clock);
  ~GrpcGossipTransport() override;

  void Ping(const PeerRef& to, const proto::PingRequest& req,
            absl::Duration timeout, AckCallback done) override;
  void PingReq(const PeerRef& to, const proto::PingRequest& req,
               absl::Duration timeout, AckCallback done) override;
  void PushPull(const PeerRef& to, const proto::PushPullRequest& req,
                absl::Duration timeout, PushPullCallback done) override;

 private:
  struct Peer {
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<proto::GossipService::Stub> stub;
  };
  absl::StatusOr<Peer*> PeerFor(const std::string& address);
  // `timeout`, or kConnectBudget while `peer`'s channel is not connected.
  static absl::Duration Budget(Peer* peer, absl::Duration timeout);
  template <typename Resp>
  absl::Status CheckPeer(const PeerRef& to, grpc::ClientContext& ctx,
                         const Resp& resp);
  void CallStarted();
  void CallFinished();

  const identity::GrpcSecurity security_;
  common::Clock* const clock_;
  absl::Mutex mu_;
  std::shared_ptr<const identity::PeerCredentials> credentials_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::unique_ptr<Peer>> peers_
      ABSL_GUARDED_BY(mu_);
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace skipswarm::membership

#endif  // SKIPSWARM_MEMBERSHIP_GRPC_GOSSIP_H_
