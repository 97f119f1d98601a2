// Who may be a member of a gossip swarm: the admission policy the founder
// writes into the signed swarm manifest, and the invitations it mints.
//
//   // Founder (`skipswarm invite`):
//   SS_ASSIGN_OR_RETURN(proto::SignedInvite inv,
//                       MintInvite(*founder_key, {"skipswarm", expires, node_id}, nonce16));
//   std::cout << EncodeInvite(inv);                    // "ssinv1.…"
//   // Joiner (--invite) and every member, for each record:
//   SS_ASSIGN_OR_RETURN(proto::SignedInvite inv, DecodeInvite(token));
//   SS_RETURN_IF_ERROR(CheckAdmission(policy, node_id, inv, now));
//
// Note [Admission]
// A swarm's founder chooses, in the manifest every member verifies and
// serves (manifest/manifest.proto ManifestAdmission), one of:
//  * open: any node key may join (the behaviour before policies existed);
//  * invite: a node is admitted iff its record carries an invitation that
//    the founder's manifest key signed, for this swarm name, not expired at
//    the receiver's `now`, and (when the invite names one) for this node id;
//    or its id is on the manifest's allow-list;
//  * allowlist: only the ids on the manifest's allow-list.
// The founder is always admitted. The check is part of VerifyRecord
// (membership/record.h), so a record that fails it never enters a table:
// nothing built on the table (the planners, replica groups, state transfer,
// relays, peer copies) ever sees the node. Gossip requests (ping, ping-req,
// push-pull) from an id that is neither admitted in the table nor carries
// an admissible record of itself in the same message are refused before
// anything in them is applied or anything is sent back: a stranger learns
// no member table (membership_api.cc). A gossip daemon's pipeline, replica
// group and state services refuse any caller not in its table outright
// (PERMISSION_DENIED; node/daemon/reporting/daemon_quotas.h members_only),
// where an open swarm gives strangers a small quota. A joiner checks its own invite
// against the fetched manifest before any state moves (cli/manifest_step.cc),
// so an operator's mistake (no, expired, forged or someone else's invite)
// is named at start; a modified joiner that skips the check meets the
// same refusal at every member.
// Why in the record: records travel second-hand (gossip, push-pull) and each
// receiver must decide alone, with no history, whether a node is admitted;
// the invite inside the signed record makes that decision local and equal
// everywhere. Why expiry at `now` (not at join time): members cannot agree
// on when a node joined, so an invite is a lease: once it expires (by each
// member's injected clock), every member refuses the node's new records and
// its gossip requests, and evicts the record it holds at its next probe
// tick (AdmittedUntil; membership_impl.h Note [Eviction]): the node leaves
// every view, so the planners drop it and the data services, whose member
// set follows the view, refuse it. Restart it with a fresh --invite; mint
// invites that outlive the run. An unbound invite admits any one key that holds it
// (a bearer token): keep it secret, prefer --node_id.
// Signed bytes are domain-separated ("skipswarm invite v1|" + the Invite):
// the founder's key also signs its node records and the manifest, and no
// one of those may be replayed as another.
//
// Thread rule: free functions; thread-safe.
#ifndef SKIPSWARM_MEMBERSHIP_ADMISSION_H_
#define SKIPSWARM_MEMBERSHIP_ADMISSION_H_

#include <optional>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/node_id.h"
#include "identity/identity.h"
#include "proto/gossip.pb.h"

namespace skipswarm::membership {

enum class AdmissionMode { kOpen, kInvite, kAllowList };

// "open", "invite", "allowlist".
absl::string_view AdmissionModeName(AdmissionMode mode);
// Parses those names (empty reads as open); InvalidArgument otherwise.
absl::StatusOr<AdmissionMode> ParseAdmissionMode(absl::string_view name);

struct AdmissionPolicy {
  AdmissionMode mode = AdmissionMode::kOpen;
  // The swarm name invites must carry (kInvite).
  std::string swarm_name;
  // Raw Ed25519 key of the founder (the manifest's signer): it signs
  // invites, and its id is always admitted. Required unless kOpen.
  std::string founder_public_key;
  // Admitted without an invite (kInvite), or the only ones (kAllowList).
  absl::flat_hash_set<common::NodeId> allowed_ids;
  // kOpen: the join work every non-founder record must carry (Note [Join
  // work] in membership/join_work.h), in leading zero bits; 0 asks none.
  uint32_t join_work_bits = 0;
  // The swarm manifest's id (hex SHA-256 of its signed bytes) that join
  // work is bound to.
  std::string manifest_id;
  // kOpen: iterations a newcomer serves on probation (Note [Newcomer
  // probation] in node/daemon/gossip/training_members.h); 0: none.
  uint32_t probation_iterations = 0;
};

// A token longer than this is not one of ours.
inline constexpr size_t kMaxInviteTokenBytes = 1024;
inline constexpr size_t kInviteNonceBytes = 16;

struct InviteOptions {
  std::string swarm_name;
  absl::Time expires;
  std::optional<common::NodeId> node_id;  // empty: any one node key
};

// The invite `founder` signs; `nonce` must be kInviteNonceBytes random
// bytes (passed in: randomness comes from the caller).
absl::StatusOr<proto::SignedInvite> MintInvite(const identity::Identity& founder,
                                               const InviteOptions& options,
                                               absl::string_view nonce);

// Printable token: "ssinv1." + unpadded base64url of the SignedInvite.
std::string EncodeInvite(const proto::SignedInvite& invite);
// InvalidArgument naming what is wrong (prefix, base64, size, parse).
absl::StatusOr<proto::SignedInvite> DecodeInvite(absl::string_view token);

// OK iff `policy` admits node `id` whose record carries `invite` (empty
// when it carries none) at `now`. Otherwise PermissionDenied with the cause:
// no invite, forged (not the founder's signature), another swarm, bound to
// another node, expired (when).
absl::Status CheckAdmission(const AdmissionPolicy& policy, const common::NodeId& id,
                            const proto::SignedInvite& invite, absl::Time now);

// Until when a record of node `id` carrying `invite`, already accepted by
// VerifyRecord at some earlier time, stays admitted under `policy` (Note
// [Admission], leases): InfiniteFuture in an open swarm, for the founder and
// for allow-listed ids; the invite's expiry otherwise (InfinitePast when it
// carries none or it does not parse). The signature is not checked again.
absl::Time AdmittedUntil(const AdmissionPolicy& policy, const common::NodeId& id,
                         const proto::SignedInvite& invite);

}  // namespace skipswarm::membership

#endif  // SKIPSWARM_MEMBERSHIP_ADMISSION_H_
