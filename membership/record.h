// Signed node records: every node owns one NodeRecord (proto/gossip.proto),
// signs it with its identity key and bumps its incarnation on every change.
// Receivers keep a record only if it verifies here AND is newer than what
// they hold (IsNewerRecord), so a forged, replayed or stale record never
// reaches a view.
//
//   proto::NodeRecord r = ...;            // node_id/public_key filled by Sign
//   SS_ASSIGN_OR_RETURN(auto signed_r, SignRecord(identity, r));
//   ...
//   SS_ASSIGN_OR_RETURN(proto::NodeRecord got,
//                       VerifyRecord(signed_r, policy, clock->Now()));
//
// Checks, in order (the first failure is returned; all are Unauthenticated
// for forgery, FailedPrecondition for a wrong swarm or model,
// PermissionDenied for a node the swarm does not admit, and InvalidArgument
// for malformed or out-of-range content):
//   size ≤ kMaxRecordBytes, parse, public key 32 bytes, node_id ==
//   sha256(public_key), join work (an open swarm's proof of work:
//   membership/join_work.h, PermissionDenied), signature, swarm id, admission (an invite or the
//   allow-list: membership/admission.h), model id, averaging id,
//   signed_at within [now - max_age, now + max_future_skew], field limits
//   (stages within the model, slots, speed, addresses, incarnation).
//
// Thread rule: free functions, thread-safe.
#ifndef SKIPSWARM_MEMBERSHIP_RECORD_H_
#define SKIPSWARM_MEMBERSHIP_RECORD_H_

#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/node_id.h"
#include "identity/identity.h"
#include "membership/admission.h"
#include "proto/gossip.pb.h"

namespace skipswarm::membership {

inline constexpr size_t kMaxRecordBytes = 8 * 1024;
inline constexpr int kMaxAddresses = 8;
inline constexpr int kMaxStages = 64;
inline constexpr uint32_t kMaxRecordMemorySlots = 4096;
inline constexpr size_t kMaxAddressBytes = 256;
// Relays an outbound-only record may name (NodeRecord.relays).
inline constexpr int kMaxRecordRelays = 4;
// Members a record may vouch for (NodeRecord.vouches).
inline constexpr int kMaxRecordVouches = 64;
// Members a record may name as banned (NodeRecord.bans; Note [Gossiped
// bans] in node/train/gossiped_bans.h).
inline constexpr int kMaxRecordBans = 16;
// Seconds per layer per sample above this are nonsense (an hour).
inline constexpr double kMaxSecondsPerLayerPerSample = 3600;
// Incarnations never come near the top of uint64 (Note [Incarnation
// bounds]): a record above kMaxIncarnation is refused, and a node never
// signs one (its refutations saturate there instead of wrapping to 0).
inline constexpr uint64_t kMaxIncarnation = uint64_t{1} << 62;
// An opinion about ourselves may name an incarnation above our own (a
// record of an earlier life of our key) by at most this; anything further
// is forged, and refuting it would hand the forger our incarnation space.
inline constexpr uint64_t kMaxRefutationJump = uint64_t{1} << 24;

struct RecordPolicy {
  // Records of other swarms are rejected.
  std::string swarm_id;
  // A record signed further than this in the future is rejected (clock skew).
  absl::Duration max_future_skew = absl::Minutes(5);
  // A record signed longer ago than this is stale; owners re-sign well
  // within it (Membership re-signs every max_age / 4).
  absl::Duration max_age = absl::Hours(24);
  // Who may be a member (Note [Admission] in membership/admission.h): open,
  // by invitation or by allow-list; refusals are PermissionDenied.
  AdmissionPolicy admission;
  // When non-empty, the model every member trains (NodeRecord.model_id):
  // records of another model, or of none, are refused (FailedPrecondition),
  // and this node's own record carries it.
  std::string model_id;
  // Likewise the replica averaging every member uses (NodeRecord.
  // averaging_id): H, the codec and overlap must agree, or replicas would
  // mix pseudo-gradients with gradients, or rounds of different lengths.
  std::string averaging_id;
  // When > 0, the model's stage count: a record hosting (or publishing a
  // digest of) a stage outside 0..num_stages-1 is refused.
  uint32_t num_stages = 0;
  // The swarm manifest says frames are signed (Note [Checkable evidence] in
  // node/compute/evidence.h, "Signed swarms"): a record without
  // sign_frames is refused (FailedPrecondition), and this node's own
  // record carries it.
  bool sign_frames = false;
};

// The swarm id of a swarm named `name`; with a non-empty `secret`, a private
// swarm: "<name>/<hex of SHA-256(name, secret)>", so a node without the
// secret cannot present the id every request and record must carry (and
// TLS keeps it off the wire in clear). The secret itself is never sent.
std::string DeriveSwarmId(absl::string_view name, absl::string_view secret);

// Fills node_id, public_key, signed_at_unix_ms (= `now`) of `record` from
// `identity` and signs its serialization.
absl::StatusOr<proto::SignedNodeRecord> SignRecord(const identity::Identity& identity,
                                                   proto::NodeRecord record,
                                                   absl::Time now);

// Verifies everything that can be checked without history (see above).
absl::StatusOr<proto::NodeRecord> VerifyRecord(
    const proto::SignedNodeRecord& signed_record, const RecordPolicy& policy,
    absl::Time now);

// The bytes a reporter signs for `update` (its signature field excluded),
// bound to `swarm_id` so an opinion cannot be replayed in another swarm.
std::string OpinionSignedBytes(const proto::MembershipUpdate& update,
                               absl::string_view swarm_id);
// Sets `update`'s reporter to `identity` and signs it.
absl::Status SignOpinion(const identity::Identity& identity,
                         absl::string_view swarm_id,
                         proto::MembershipUpdate* update);
// Unauthenticated unless `update` is signed by the owner of
// `reporter_public_key` (the reporter's key from the receiver's table).
absl::Status VerifyOpinion(const proto::MembershipUpdate& update,
                           absl::string_view swarm_id,
                           absl::string_view reporter_public_key);

// The owner's state in a record: UNSPECIFIED reads as ALIVE.
proto::MemberState OwnerState(const proto::NodeRecord& record);

// Replay protection against what a receiver already holds for that node:
// OK if `incoming` has a higher incarnation than `known_incarnation`;
// AlreadyExists if equal (a duplicate — harmless, ignore it);
// FailedPrecondition("replayed/stale") if lower.
absl::Status CheckNewer(uint64_t known_incarnation,
                        const proto::NodeRecord& incoming);

}  // namespace skipswarm::membership

#endif  // SKIPSWARM_MEMBERSHIP_RECORD_H_
