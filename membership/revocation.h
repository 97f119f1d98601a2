// The swarm's revocation list: node ids and invites the founder no longer
// admits, whatever their invite or allow-list entry says.
//
//   // Founder (`skipswarm revoke`): the previous list plus the new entries.
//   list.set_serial(previous.serial() + 1);
//   list.add_node_ids(bad.Bytes());
//   SS_ASSIGN_OR_RETURN(proto::SignedRevocationList signed_list,
//                       SignRevocations(*founder_key, list));
//   // Every member (Membership::AddRevocations, or from gossip):
//   SS_ASSIGN_OR_RETURN(RevocationSet set, VerifyRevocations(signed_list, policy));
//   if (set.Revokes(id, record.invite())) ...
//
// Note [Revocation]
// * One list per swarm, signed whole by the founder's key (the manifest's
//   signer; AdmissionPolicy::founder_public_key) for the swarm's name, with
//   a serial: a list with a higher serial replaces the one held, so the
//   founder re-signs the whole list, previous entries included, to add one.
//   Entries name a node id (that key is out, in every mode, whatever it
//   presents) or an invite id (the invite's nonce, printed by `skipswarm
//   invite`: whoever holds that invite is out).
// * Bounded: at most kMaxRevocationListBytes signed bytes (about 1,500
//   entries), so a member's work per received list is one size check, one
//   parse and one signature check, done outside the membership lock, and
//   only for a list newer than the one it holds.
// * Spread (membership_impl.h): a member that accepts a newer list evicts
//   the members it names at once, refuses their records and requests from
//   then on, attaches the list to its next gossip messages and to every
//   push-pull (anti-entropy), so every member, joiners included, holds the
//   newest list within a few push-pull rounds. Any node may inject a list
//   (it is the founder's signature that counts), so the founder need not be
//   online: the daemons load --revocations_file at start and whenever it
//   changes.
// * The founder cannot be revoked (its key signs the list); a member whose
//   own id or invite is on the list logs it once and is refused everywhere.
// * The daemon's data services refuse a revoked id outright in every
//   admission mode, an open swarm included (Membership::IsRevoked, the
//   quotas' PeerClass::kRevoked), and a daemon whose own node is revoked
//   stops with the cause (Membership::SelfAdmission); an evicted node that
//   gets no gossip any more learns it from the answer to its own probes
//   (Note [Revocation notice] in membership_revocation.cc).
// Signed bytes are domain-separated ("skipswarm revocations v1|" + list).
//
// Thread rule: free functions and a value type; thread-compatible.
#ifndef SKIPSWARM_MEMBERSHIP_REVOCATION_H_
#define SKIPSWARM_MEMBERSHIP_REVOCATION_H_

#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/node_id.h"
#include "identity/identity.h"
#include "membership/admission.h"
#include "proto/gossip.pb.h"

namespace skipswarm::membership {

inline constexpr size_t kMaxRevocationListBytes = 64 * 1024;

// What a verified list revokes.
struct RevocationSet {
  uint64_t serial = 0;  // 0: no list
  absl::flat_hash_set<common::NodeId> nodes;
  absl::flat_hash_set<std::string> invites;  // invite ids (nonces, raw bytes)

  // Whether node `id` presenting `invite` (empty: none) is revoked.
  bool Revokes(const common::NodeId& id, const proto::SignedInvite& invite) const;
  size_t size() const { return nodes.size() + invites.size(); }
};

// The invite's id: its nonce (raw bytes; empty when there is no invite or it
// does not parse).
std::string InviteId(const proto::SignedInvite& invite);

// Signs `list` (swarm_name and serial set by the caller) with `founder`.
// InvalidArgument for an empty swarm name, serial 0, a malformed entry or a
// list over kMaxRevocationListBytes.
absl::StatusOr<proto::SignedRevocationList> SignRevocations(const identity::Identity& founder,
                                                            const proto::RevocationList& list);

// The list's serial without checking anything else (0 if it does not parse
// or is over the size limit): cheap, to skip lists no newer than ours.
uint64_t PeekRevocationSerial(const proto::SignedRevocationList& signed_list);

// Verifies size, parse, the founder's signature (policy.founder_public_key;
// FailedPrecondition when there is none), the swarm name and every entry's
// form. Unauthenticated for a bad signature, InvalidArgument otherwise.
absl::StatusOr<RevocationSet> VerifyRevocations(const proto::SignedRevocationList& signed_list,
                                                const AdmissionPolicy& policy);

// Printable form for files: "ssrev1." + unpadded base64url.
std::string EncodeRevocations(const proto::SignedRevocationList& signed_list);
absl::StatusOr<proto::SignedRevocationList> DecodeRevocations(absl::string_view text);

}  // namespace skipswarm::membership

#endif  // SKIPSWARM_MEMBERSHIP_REVOCATION_H_
