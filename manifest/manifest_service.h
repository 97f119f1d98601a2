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
// Note [Manifest joiners]
// * The manifest is a joiner's first call, made before it has a record, so
//   the service knows its callers by address only and all strangers share
//   one budget (Note [Peer quotas] in common/peer_quota.h). A Sybil flood
//   from many addresses, each within its own budget, keeps that shared
//   bucket empty, and an honest joiner's fetch was refused for as long as
//   the flood lasted: it could not join at all.
// * So, as gossip does (Note [Joiners' budget]), a caller that proves it is
//   admitted draws on the quota's joiners' budget while the strangers'
//   is short. The proof is the one its record will carry: in an invite
//   swarm, the founder's invite, checked as every member checks it
//   (membership::CheckAdmission: the founder's signature, this swarm, not
//   expired, bound to the caller's node id when it names one). A proven
//   call is charged to its invite (its nonce: many addresses or ids that
//   share one invite share one stranger's budget) and to the joiners'
//   budget, so a flood of proven calls stays bounded by both; an invalid
//   proof is refused as before, after one signature check, made only while
//   the strangers' budget is short.
// * Open swarms have no such proof before the manifest (their join work
//   is bound to the manifest's id) and allow-listed ids have nothing a
//   stranger cannot copy (a public key is no proof of holding it): their
//   joiners keep the strangers' budget, and retry while refused.
// * A refusal for the budget is RESOURCE_EXHAUSTED, which a joiner retries
//   with backoff until its timeout (bootstrap.h, step "busy").
//
// Thread rule: the service is immutable and thread-safe; CallGetManifest
// blocks its caller for at most `timeout`.
#ifndef SKIPSWARM_MANIFEST_MANIFEST_SERVICE_H_
#define SKIPSWARM_MANIFEST_MANIFEST_SERVICE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/peer_quota.h"
#include "membership/admission.h"
#include "identity/tls_credentials.h"
#include "manifest/manifest.grpc.pb.h"

namespace skipswarm::manifest {

class ManifestService final : public proto::SwarmManifestService::Service {
 public:
  // `quota` (Note [Peer quotas], common/peer_quota.h; null: none): callers
  // are strangers known by their address (host, without the port), each
  // call one message of the request's size; refused: RESOURCE_EXHAUSTED.
  // `admission` (the manifest's policy) and `clock` (borrowed; must outlive
  // the service) check a joiner's invite (Note [Manifest joiners]); without
  // a clock no caller proves anything.
  ManifestService(proto::SignedManifest signed_manifest, std::string swarm_id,
                  std::shared_ptr<common::PeerQuota> quota = nullptr,
                  membership::AdmissionPolicy admission = {}, common::Clock* clock = nullptr);

  grpc::Status GetManifest(grpc::ServerContext* context, const proto::GetManifestRequest* request,
                           proto::GetManifestResponse* response) override;

 private:
  // The quota key of the joiner `request` claims to be ("invite:" + the
  // invite's nonce), empty when it carries none that parses.
  std::string JoinerKeyOf(const proto::GetManifestRequest& request) const;
  // Whether `request` carries an invite that admits its node id now.
  bool ProvesJoin(const proto::GetManifestRequest& request) const;

  const proto::SignedManifest signed_manifest_;
  const std::string swarm_id_;
  const std::shared_ptr<common::PeerQuota> quota_;
  const membership::AdmissionPolicy admission_;
  common::Clock* const clock_;
};

// What a joiner sends to prove it is admitted (Note [Manifest joiners]);
// empty fields: nothing.
struct JoinerProof {
  std::string signed_invite;  // a serialized proto::SignedInvite
  std::string node_id;        // the joiner's id, 32 bytes
};

// The host part of a gRPC peer string ("ipv4:10.0.0.1:5000" ->
// "ipv4:10.0.0.1", "ipv6:[::1]:5000" -> "ipv6:[::1]").
std::string PeerHost(const std::string& grpc_peer);

// One GetManifest call to `address` (HOST:PORT) with `credentials` (TLS
// or plain text), as swarm `swarm_id`. The status is gRPC's, unexplained
// (bootstrap.h explains it).
absl::StatusOr<proto::SignedManifest> CallGetManifest(
    const std::string& address, const std::shared_ptr<const identity::PeerCredentials>& credentials,
    const std::string& swarm_id, absl::Duration timeout, const JoinerProof& proof = {});

}  // namespace skipswarm::manifest

#endif  // SKIPSWARM_MANIFEST_MANIFEST_SERVICE_H_
