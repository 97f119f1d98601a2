// Join work: the proof of work an open swarm asks of every node key before
// its record enters any table (Note [Join work]).
//
//   // Joiner, once per key and manifest (cli/manifest_step.cc):
//   SS_ASSIGN_OR_RETURN(uint64_t nonce,
//                       SolveJoinWork(policy.manifest_id, key.public_key(), policy.join_work_bits));
//   record.set_join_work(nonce);
//   // Every receiver, inside VerifyRecord before the signature check:
//   SS_RETURN_IF_ERROR(CheckJoinWork(policy, id, record.public_key(), record.join_work()));
//
// Note [Join work]
// In an open swarm anyone may join, so identities are free and one operator
// could run thousands (a Sybil burst: floods of records, many replica slots,
// outvoting honest replicas). The founder makes each identity cost work:
// the manifest's ManifestAdmission.join_work_bits = b asks every record to
// carry a nonce n with
//   SHA-256("skipswarm join work v1|" + manifest id + "|" + public key + n as
//           8 little-endian bytes)
// starting with b zero bits: about 2^b hashes to find, one to check. It is
// bound to the key (work done for one identity buys no other) and to the
// manifest id (the hex SHA-256 of the signed manifest bytes), so work done
// for another swarm, or before the founder re-issued the manifest, is
// worthless. It does not expire: the cost is per identity, paid once.
// Receivers check it first, right after the key/id match and before the
// Ed25519 signature (one hash instead of a verify), so a flood of records
// without work costs a receiver one SHA-256 each and is refused with
// PermissionDenied naming the requirement. Where work is asked, an open
// swarm treats strangers as a selective one does (Note [Admission]): a
// gossip request whose sender has no record in the table and carries no
// admissible one of itself is refused before anything is applied or sent
// back (no member table for it; Membership's CheckSenderAdmitted), and the
// daemon's data services serve table members only. The founder is exempt (its key
// signs the manifest); invite and allowlist swarms ask for no work (their
// founder vouches for each member) and a manifest that asks for both is
// refused. b is at most kMaxJoinWorkBits so a manifest cannot make joining
// impossible; AdmissionPolicyOf (manifest/manifest_admission.h) refuses more.
// Work only prices identities; what a new identity may do before it has
// shown honest work is Note [Newcomer probation] (node/daemon/gossip/
// training_members.h).
//
// Thread rule: free functions; thread-safe.
#ifndef SKIPSWARM_MEMBERSHIP_JOIN_WORK_H_
#define SKIPSWARM_MEMBERSHIP_JOIN_WORK_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/node_id.h"
#include "membership/admission.h"

namespace skipswarm::membership {

// 2^32 hashes is minutes of one core; beyond that joining stops being a
// cost and becomes a wall.
inline constexpr uint32_t kMaxJoinWorkBits = 32;

// The number of leading zero bits of the work hash of `nonce`.
int JoinWorkBits(absl::string_view manifest_id, absl::string_view public_key, uint64_t nonce);

// OK when `policy` asks no work of node `id` (not open, no bits, the
// founder) or when `nonce` meets it; PermissionDenied naming the
// requirement otherwise.
absl::Status CheckJoinWork(const AdmissionPolicy& policy, const common::NodeId& id,
                           absl::string_view public_key, uint64_t nonce);

// Whether `policy` asks work of node `id` at all.
bool NeedsJoinWork(const AdmissionPolicy& policy, const common::NodeId& id);

// The first nonce >= `first` that meets `bits`; ResourceExhausted after
// `max_tries` hashes (a caller's bound; the expected count is 2^bits).
absl::StatusOr<uint64_t> SolveJoinWork(absl::string_view manifest_id,
                                       absl::string_view public_key, uint32_t bits,
                                       uint64_t first = 0,
                                       uint64_t max_tries = uint64_t{1} << 40);

}  // namespace skipswarm::membership

#endif  // SKIPSWARM_MEMBERSHIP_JOIN_WORK_H_
