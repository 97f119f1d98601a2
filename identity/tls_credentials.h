// Mutual TLS between SkipSwarm nodes from their Ed25519 identities
// (identity.h), for every gRPC service a node runs: gossip (grpc_gossip.h),
// the pipeline transport (node/transport) and the replica group
// (node/train).
//
// Note [Peer authentication]
// Both ends of every connection present their node's self-signed
// certificate; nobody checks it against a CA. The SHA-256 of the
// certificate's Ed25519 key IS the peer's node id, so:
//   - a server requires the client's certificate, and every call checks
//     that the id it proves equals the id the call claims (the sender named
//     in the request or stream metadata): CheckPeer, UNAUTHENTICATED
//     otherwise (the server logs it and keeps serving);
//   - a client that knows which node it calls builds its channel with
//     ForChannel(expected): the handshake fails unless the server's
//     certificate is that node's (the caller sees UNAVAILABLE, the log says
//     which node answered instead). Gossip, which may call a bootstrap
//     address without knowing the id, checks after the call instead.
// Plain text (no certificates, no checks) only from Insecure(), which
// callers use behind an explicit --insecure flag (local tests).
//
//   SS_ASSIGN_OR_RETURN(auto creds, PeerCredentials::Create(
//                                       {identity.get()}, clock->Now()));
//   builder.AddListeningPort(address, creds->ForServer(), &port);
//   // in a handler:
//   absl::Status s = creds->CheckPeer(ctx->auth_context(), claimed_sender);
//   // a client:
//   grpc::ChannelArguments args;
//   creds->ConfigureChannel(args);
//   auto ch = grpc::CreateCustomChannel(address, creds->ForChannel(peer), args);
//
// Thread rule: immutable after creation; thread-safe. The identity must
// outlive the object and every channel and server built from it.
#ifndef SKIPSWARM_IDENTITY_TLS_CREDENTIALS_H_
#define SKIPSWARM_IDENTITY_TLS_CREDENTIALS_H_

#include <grpcpp/grpcpp.h>
#include <grpcpp/security/tls_certificate_provider.h>

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/node_id.h"
#include "identity/identity.h"

namespace skipswarm::identity {

struct GrpcSecurity {
  // Our identity (certificate and key). Must outlive everything built from
  // it. Required unless `insecure`.
  const Identity* identity = nullptr;
  // Plain text, no peer authentication: only behind an explicit --insecure.
  bool insecure = false;
};

class PeerCredentials {
 public:
  // TLS from `security.identity` (certificate valid from `now` - 1 day), or
  // plain text if `security.insecure`. InvalidArgument without an identity.
  static absl::StatusOr<std::shared_ptr<const PeerCredentials>> Create(
      const GrpcSecurity& security, absl::Time now);
  // Plain text; the caller has said --insecure.
  static std::shared_ptr<const PeerCredentials> Insecure();

  bool insecure() const { return provider_ == nullptr; }
  // Our node id (zero when insecure).
  const common::NodeId& id() const { return id_; }

  // Server side: presents our certificate and requires the client's.
  std::shared_ptr<grpc::ServerCredentials> ForServer() const;
  // Client side: presents our certificate. With a non-zero `expected`, the
  // TLS handshake fails unless the server's certificate is that node's.
  std::shared_ptr<grpc::ChannelCredentials> ForChannel(
      const common::NodeId& expected = common::NodeId()) const;
  // Channel arguments TLS needs (the target name our certificates carry).
  void ConfigureChannel(grpc::ChannelArguments& args) const;

  // OK when plain text, or when `auth` (a call's auth context, server or
  // client side) proves node `claimed`; UNAUTHENTICATED otherwise, naming
  // both ids.
  absl::Status CheckPeer(const std::shared_ptr<const grpc::AuthContext>& auth,
                         const common::NodeId& claimed) const;

 private:
  PeerCredentials() = default;

  std::shared_ptr<grpc::experimental::CertificateProviderInterface> provider_;
  common::NodeId id_;
};

// The node id proven by the peer's TLS certificate (UNAUTHENTICATED when the
// connection is not TLS or the certificate is not an Ed25519 one).
absl::StatusOr<common::NodeId> PeerIdFromAuthContext(
    const grpc::AuthContext& auth);

// The node id a PEM certificate proves (UNAUTHENTICATED if none).
absl::StatusOr<common::NodeId> NodeIdFromCertificatePem(absl::string_view pem);

}  // namespace skipswarm::identity

#endif  // SKIPSWARM_IDENTITY_TLS_CREDENTIALS_H_
