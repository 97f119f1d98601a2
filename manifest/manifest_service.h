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
//   the service knows its callers by address only (an IPv6 caller by its
//   /64: Note [Caller keys] in common/caller_key.h) and all strangers share
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
// * An id admitted without an invite (the founder, and the allow-list of an
//   allowlist swarm or of an invite swarm that has one) names nothing
//   secret: its id and public key are public. Its proof is holding the key,
//   shown by signing a challenge of the seed's (manifest/join_challenge.h),
//   at one more round trip. A seed refusing a caller that named this
//   swarm's id, in a swarm that lets listed ids in, adds a challenge to the
//   refusal (trailing metadata "skipswarm-join-challenge"). The challenge
//   is stateless: a time bucket and a keyed hash of the bucket and the
//   swarm id under a secret the process draws at start, taken for its
//   bucket and the next, so the seed stores nothing per caller and a flood
//   of refusals costs one keyed hash each. The joiner signs, with its node
//   key (the key its records are signed with), a domain-separated message
//   binding the swarm id, its node id and the challenge, and retries at
//   once with its id, public key, the challenge and the signature (once per
//   backoff wait: a seed giving a new challenge at every call gets no tight
//   loop). The seed checks, cheapest first and only while the strangers'
//   budget is short: the challenge is its own and fresh (another seed's, a
//   restarted seed's or a stale one is not), the id is listed (a set
//   lookup; ClaimOf already refused unlisted ids a claim), the key is the
//   id's (one hash), the signature (one verify). A proven call is charged
//   to the id ("key:" + the id: one identity's stranger budget, however
//   many addresses send it) and to the joiners' budget. A replayed proof is
//   bounded by both while its challenge is fresh, and useless after; a
//   signature names its id, so it cannot be spent for another. The bucket
//   is the seed's steady clock: only the process that issued a challenge
//   checks it, so no two clocks need agree. The challenge names no caller
//   (nor its address, which a joiner behind NAT may not keep): a proof
//   copied to other addresses is still one id's budget. A caller carrying
//   both an invite and a signature is judged on the signature only when its
//   id is listed, so an invited joiner that signed a challenge keeps its
//   invite's proof.
// * An open swarm that asks no work (join_work_bits 0) has no proof an
//   identity costs anything: its joiners keep the strangers' budget and
//   retry while refused (a founder who expects floods asks work).
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
#include "manifest/join_challenge.h"
#include "manifest/manifest.grpc.pb.h"

namespace skipswarm::manifest {

class ManifestService final : public proto::SwarmManifestService::Service {
 public:
  // `quota` (Note [Peer quotas], common/peer_quota.h; null: none): callers
  // are strangers known by their address (common::CallerKey: an IPv4
  // address or an IPv6 /64, Note [Caller keys]), each
  // call one message of the request's size; refused: RESOURCE_EXHAUSTED.
  // `admission` (the manifest's policy) and `clock` (borrowed; must outlive
  // the service) check a joiner's invite (Note [Manifest joiners]); without
  // a clock no caller proves anything.
  // `challenge_secret` (NewJoinChallengeSecret; empty: no challenges) keys
  // the challenges a listed id signs to prove itself.
  ManifestService(proto::SignedManifest signed_manifest, std::string swarm_id,
                  std::shared_ptr<common::PeerQuota> quota = nullptr,
                  membership::AdmissionPolicy admission = {}, common::Clock* clock = nullptr,
                  std::string challenge_secret = "");

  grpc::Status GetManifest(grpc::ServerContext* context, const proto::GetManifestRequest* request,
                           proto::GetManifestResponse* response) override;

 private:
  // The joiner a request claims to be, read once per call: its quota key
  // ("invite:" + the invite's nonce, "key:" + a listed id that signed a
  // challenge, or "work:" + its public key in an open swarm that asks
  // work; empty when it carries none that parses) and the parsed invite
  // ProvesJoin checks.
  struct JoinerClaim {
    std::string key;
    bool listed = false;  // the key is "key:": a signed challenge
    proto::SignedInvite invite;
  };
  JoinerClaim ClaimOf(const proto::GetManifestRequest& request) const;
  // Whether `claim` (of `request`) is an invite that admits its node id
  // now, a listed id's signature of a fresh challenge of ours, or join
  // work that meets this open swarm's bits.
  bool ProvesJoin(const proto::GetManifestRequest& request, const JoinerClaim& claim) const;
  // Whether the swarm lets ids in without an invite or work (allowlist, or
  // invite with an allow-list) and this service issues challenges.
  bool ChallengesListed() const;
  // Whether `request` carries a well-sized signed challenge from the
  // founder's or a listed id (no crypto yet).
  bool ListedClaim(const proto::GetManifestRequest& request) const;
  // The signature check of a listed claim: fresh challenge, the key is the
  // id's, the signature verifies.
  bool ProvesKey(const proto::GetManifestRequest& request) const;
  // The "<manifest id>/<bits>" a refused caller of this swarm may solve;
  // empty where the swarm asks no work.
  std::string JoinWorkAsk(const proto::GetManifestRequest& request) const;
  // The challenge a refused caller of this swarm may sign; empty where the
  // swarm lets no listed ids in.
  std::string ChallengeFor(const proto::GetManifestRequest& request) const;

  const proto::SignedManifest signed_manifest_;
  const std::string swarm_id_;
  const std::shared_ptr<common::PeerQuota> quota_;
  const membership::AdmissionPolicy admission_;
  common::Clock* const clock_;
  const common::NodeId founder_id_;
  const std::optional<JoinChallenges> challenges_;  // none without a secret or a clock
};

// What a joiner sends to prove it is admitted (Note [Manifest joiners]);
// empty fields: nothing.
struct JoinerProof {
  std::string signed_invite;  // a serialized proto::SignedInvite
  std::string node_id;        // the joiner's id, 32 bytes
  // Open swarms: the joiner's raw public key and its join work.
  std::string public_key;
  uint64_t join_work = 0;
  // A listed id (with `node_id` and `public_key`): the seed's challenge
  // and the signature of it (manifest/join_challenge.h).
  std::string challenge;
  std::string signature;
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

// What a refusing seed asked for in its trailing metadata, each parsed as
// hostile input (nullopt: not asked, or malformed).
struct SeedAsks {
  std::optional<JoinWorkAsk> work;
  std::optional<std::string> challenge;  // well-formed (ParseJoinChallenge)
};

// One GetManifest call to `address` (HOST:PORT) with `credentials` (TLS
// or plain text), as swarm `swarm_id`. The status is gRPC's, unexplained
// (bootstrap.h explains it). `asks` (may be null): set to what the seed
// asked, reset when it asked nothing.
absl::StatusOr<proto::SignedManifest> CallGetManifest(
    const std::string& address, const std::shared_ptr<const identity::PeerCredentials>& credentials,
    const std::string& swarm_id, absl::Duration timeout, const JoinerProof& proof = {},
    SeedAsks* asks = nullptr);

}  // namespace skipswarm::manifest

#endif  // SKIPSWARM_MANIFEST_MANIFEST_SERVICE_H_
