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
//   share one invite share one budget) and to the joiners' budget. The
//   invite's own budget is a joiner's (the quota's `joiner`: what one
//   join's call and its retries need, far under the joiners'), not a
//   stranger's, so one invite calling as fast as it may cannot hold the
//   joiners' budget empty and refuse the honest joiners behind it; a
//   flood of proven calls stays bounded by both budgets; an invalid
//   proof is refused as before, after one signature check, made only while
//   the strangers' budget is short.
// * An open swarm's proof is its join work (Note [Join work] in
//   membership/join_work.h): bound to the joiner's key and to the manifest
//   id, about 2^bits hashes to find and one to check, the same work its
//   record will carry. A joiner cannot know the bits before the manifest
//   (and without a swarm file not its id either), so a seed refusing a
//   caller for the strangers' budget names what the work is bound to in
//   the refusal (trailing metadata "skipswarm-join-work": "<manifest
//   id>/<bits>"; public: both are in the manifest and the swarm file),
//   only to a caller that named this swarm's id, and only when the swarm
//   asks work. The joiner solves it (bounded by its timeout; with a swarm
//   file, only for the pinned id, so a lying seed cannot make it work for
//   another swarm) and retries at once with its public key and nonce. The
//   seed charges a proven call to the key ("work:" + the key: one
//   identity's joiner budget, however many addresses send it) and to
//   the joiners' budget: k identities cost k times the work a join costs,
//   each gets no more than one join needs, and together no more than the
//   joiners' budget, so starving the honest joiners takes as many solved
//   identities as the joiners' budget holds joins. A proof that fails
//   (too few bits, another key's nonce, the founder's public key, which
//   asks no work) costs the seed one hash, only while the strangers'
//   budget is short, and is refused as before. The nonce found goes on to
//   the gossip step (paid once per identity, as joining costs). Why the
//   refusal asks rather than the swarm file's pin alone: the pin gives the
//   id, never the bits, and asking serves joiners without a swarm file
//   too, at one refused call each.
// * An open swarm that asks no work (join_work_bits 0) has no proof an
//   identity costs anything: its joiners keep the strangers' budget and
//   retry while refused (a founder who expects floods asks work). Nor have
//   allow-listed ids (a public key is no proof of holding it; a signature
//   over a seed's challenge would be, at a second round trip: left out).
// * A refusal for the budget is RESOURCE_EXHAUSTED, which a joiner retries
//   with backoff until its timeout (bootstrap.h, step "busy").
//
// Thread rule: the service is immutable and thread-safe; CallGetManifest
// blocks its caller for at most `timeout`.
#ifndef SKIPSWARM_MANIFEST_MANIFEST_SERVICE_H_
#define SKIPSWARM_MANIFEST_MANIFEST_SERVICE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
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
  // The joiner a request claims to be, read once per call: its quota key
  // ("invite:" + the invite's nonce, or "work:" + its public key in an
  // open swarm that asks work; empty when it carries none that parses) and
  // the parsed invite ProvesJoin checks.
  struct JoinerClaim {
    std::string key;
    proto::SignedInvite invite;
  };
  JoinerClaim ClaimOf(const proto::GetManifestRequest& request) const;
  // Whether `claim` (of `request`) is an invite that admits its node id
  // now, or join work that meets this open swarm's bits.
  bool ProvesJoin(const proto::GetManifestRequest& request, const JoinerClaim& claim) const;
  // The "<manifest id>/<bits>" a refused caller of this swarm may solve;
  // empty where the swarm asks no work.
  std::string JoinWorkAsk(const proto::GetManifestRequest& request) const;

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
  // Open swarms: the joiner's raw public key and its join work.
  std::string public_key;
  uint64_t join_work = 0;
};

// What a busy seed asked of an open swarm's joiner (Note [Manifest
// joiners]): join work of `bits` over `manifest_id` (64 lowercase hex).
struct JoinWorkAsk {
  std::string manifest_id;
  uint32_t bits = 0;
};

// The trailing metadata key of the ask, and its value parsed as hostile
// input: nullopt unless exactly "<64 lowercase hex>/<1..kMaxJoinWorkBits>".
inline constexpr char kJoinWorkAskKey[] = "skipswarm-join-work";
std::optional<JoinWorkAsk> ParseJoinWorkAsk(absl::string_view value);

// The host part of a gRPC peer string ("ipv4:10.0.0.1:5000" ->
// "ipv4:10.0.0.1", "ipv6:[::1]:5000" -> "ipv6:[::1]").
std::string PeerHost(const std::string& grpc_peer);

// One GetManifest call to `address` (HOST:PORT) with `credentials` (TLS
// or plain text), as swarm `swarm_id`. The status is gRPC's, unexplained
// (bootstrap.h explains it). `ask` (may be null): set to the join work a
// refusing seed asked for, reset when it asked none.
absl::StatusOr<proto::SignedManifest> CallGetManifest(
    const std::string& address, const std::shared_ptr<const identity::PeerCredentials>& credentials,
    const std::string& swarm_id, absl::Duration timeout, const JoinerProof& proof = {},
    std::optional<JoinWorkAsk>* ask = nullptr);

}  // namespace skipswarm::manifest

#endif  // SKIPSWARM_MANIFEST_MANIFEST_SERVICE_H_
