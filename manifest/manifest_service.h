// SwarmManifestService: every member serves the swarm manifest it trains
// under (the founder's, signed), on its node server beside gossip; a
// joiner fetches it before it builds anything (bootstrap.h).
//
//   ManifestService service(signed_manifest, swarm_id);
//   builder.RegisterService(&service);              // on the node's server
//   ...
//   absl::StatusOr<proto::SignedManifest> s = CallGetManifest(address, creds, swarm_id, 5s);
//
// The server checks the caller's protocol version and swarm id (admission:
// another --swarm_name / --swarm_secret is PERMISSION_DENIED, before any
// state moves). It sends the manifest only; the caller verifies it.
//
// Thread rule: the service is immutable and thread-safe; CallGetManifest
// blocks its caller for at most `timeout`.
#ifndef SKIPSWARM_MANIFEST_MANIFEST_SERVICE_H_
#define SKIPSWARM_MANIFEST_MANIFEST_SERVICE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/peer_quota.h"
#include "identity/tls_credentials.h"
#include "manifest/manifest.grpc.pb.h"

namespace skipswarm::manifest {

class ManifestService final : public proto::SwarmManifestService::Service {
 public:
  // `quota` (Note [Peer quotas], common/peer_quota.h; null: none): callers
  // are strangers known by their address (host, without the port), each
  // call one message of the request's size; refused: RESOURCE_EXHAUSTED.
  ManifestService(proto::SignedManifest signed_manifest, std::string swarm_id,
                  std::shared_ptr<common::PeerQuota> quota = nullptr);

  grpc::Status GetManifest(grpc::ServerContext* context, const proto::GetManifestRequest* request,
                           proto::GetManifestResponse* response) override;

 private:
  const proto::SignedManifest signed_manifest_;
  const std::string swarm_id_;
  const std::shared_ptr<common::PeerQuota> quota_;
};

// The host part of a gRPC peer string ("ipv4:10.0.0.1:5000" ->
// "ipv4:10.0.0.1", "ipv6:[::1]:5000" -> "ipv6:[::1]").
std::string PeerHost(const std::string& grpc_peer);

// One GetManifest call to `address` (HOST:PORT) with `credentials` (TLS
// or plain text), as swarm `swarm_id`. The status is gRPC's, unexplained
// (bootstrap.h explains it).
absl::StatusOr<proto::SignedManifest> CallGetManifest(
    const std::string& address, const std::shared_ptr<const identity::PeerCredentials>& credentials,
    const std::string& swarm_id, absl::Duration timeout);

}  // namespace skipswarm::manifest

#endif  // SKIPSWARM_MANIFEST_MANIFEST_SERVICE_H_
