// The admission policy a swarm manifest states (Note [Admission] in
// membership/admission.h), from the founder's flags into the manifest and
// from a verified manifest into the membership's policy; and a joiner's
// check of its own invite against it, before any state moves.
//
//   // Founder:
//   SS_RETURN_IF_ERROR(WriteAdmission("invite", "", m.mutable_admission()));
//   // Everyone, after VerifyManifest:
//   SS_ASSIGN_OR_RETURN(membership::AdmissionPolicy p, AdmissionPolicyOf(verified));
//   // Joiner:
//   SS_ASSIGN_OR_RETURN(proto::SignedInvite mine,
//                       CheckOwnAdmission(p, key->id(), invite_flag, now));
//
// Thread rule: free functions; thread-safe (CheckOwnAdmission reads a file).
#ifndef SKIPSWARM_MANIFEST_MANIFEST_ADMISSION_H_
#define SKIPSWARM_MANIFEST_MANIFEST_ADMISSION_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/node_id.h"
#include "manifest/manifest.pb.h"
#include "manifest/signed_manifest.h"
#include "membership/admission.h"
#include "proto/gossip.pb.h"

namespace skipswarm::manifest {

// Sets `out`'s policy and allow-list from --admission (open, invite,
// allowlist) and --allow_node_ids (comma-separated hex node ids; in an open
// swarm the hosts trusted from the start under probation, which
// WriteNewcomerCosts requires then). InvalidArgument for an unknown policy,
// a malformed id, or allowlist without ids.
absl::Status WriteAdmission(absl::string_view mode, absl::string_view allow_node_ids,
                            proto::ManifestAdmission* out);

// Sets an open swarm's costs for newcomers (Note [Join work] in
// membership/join_work.h, Note [Newcomer probation] in node/daemon/gossip/
// training_members.h) on `out`, whose policy WriteAdmission set.
// InvalidArgument for work above membership::kMaxJoinWorkBits, for either
// cost in an invite or allowlist swarm (its founder vouches for every
// member), or for an open swarm's allow-list without probation.
absl::Status WriteNewcomerCosts(uint32_t join_work_bits, uint32_t probation_iterations,
                                proto::ManifestAdmission* out);

// The policy `v` states; its founder key signs invites. InvalidArgument
// where the manifest's newcomer costs break WriteNewcomerCosts' rules.
absl::StatusOr<membership::AdmissionPolicy> AdmissionPolicyOf(const VerifiedManifest& v);

// `invite_flag` (a token "ssinv1.…", or the path of a file holding one)
// decoded, signature unchecked; InvalidArgument naming what is wrong.
absl::StatusOr<proto::SignedInvite> ReadInviteFlag(absl::string_view invite_flag);

// The invite this node's record should carry: empty in an open swarm (a
// given `invite_flag` is then ignored) and for the founder or a listed id;
// otherwise `invite_flag` (a token "ssinv1.…", or the path of a file
// holding one) decoded and checked as every member will check it.
// PermissionDenied / InvalidArgument naming the cause (no invite, expired,
// forged, another node's, unreadable file) otherwise.
absl::StatusOr<proto::SignedInvite> CheckOwnAdmission(const membership::AdmissionPolicy& policy,
                                                      const common::NodeId& self,
                                                      absl::string_view invite_flag,
                                                      absl::Time now);

}  // namespace skipswarm::manifest

#endif  // SKIPSWARM_MANIFEST_MANIFEST_ADMISSION_H_
