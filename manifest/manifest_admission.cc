#include "manifest/manifest_admission.h"

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "membership/join_work.h"

namespace skipswarm::manifest {

absl::Status WriteAdmission(absl::string_view mode, absl::string_view allow_node_ids,
                            proto::ManifestAdmission* out) {
  SS_ASSIGN_OR_RETURN(membership::AdmissionMode m, membership::ParseAdmissionMode(mode));
  out->set_policy(std::string(membership::AdmissionModeName(m)));
  out->clear_allowed_ids();
  for (absl::string_view hex : absl::StrSplit(allow_node_ids, ',', absl::SkipWhitespace())) {
    absl::StatusOr<common::NodeId> id = common::NodeId::FromHex(absl::StripAsciiWhitespace(hex));
    if (!id.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--allow_node_ids: '", hex, "' is not a node id (64 hex digits, as `skipswarm keygen "
          "--show_key` prints it)"));
    }
    out->add_allowed_ids(id->Bytes());
  }
  if (m == membership::AdmissionMode::kAllowList && out->allowed_ids_size() == 0) {
    return absl::InvalidArgumentError(
        "--admission=allowlist needs --allow_node_ids (only the founder could join)");
  }
  return absl::OkStatus();
}

absl::Status WriteNewcomerCosts(uint32_t join_work_bits, uint32_t probation_iterations,
                                proto::ManifestAdmission* out) {
  if (join_work_bits > membership::kMaxJoinWorkBits) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--join_work_bits=", join_work_bits, " is above ", membership::kMaxJoinWorkBits,
        " (each joiner would hash for hours)"));
  }
  SS_ASSIGN_OR_RETURN(membership::AdmissionMode m, membership::ParseAdmissionMode(out->policy()));
  if (m != membership::AdmissionMode::kOpen && (join_work_bits > 0 || probation_iterations > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--join_work_bits and --probation_iterations are for --admission=open; this swarm admits "
        "by ", membership::AdmissionModeName(m), ", so its founder vouches for every member"));
  }
  if (m == membership::AdmissionMode::kOpen && out->allowed_ids_size() > 0 &&
      probation_iterations == 0) {
    return absl::InvalidArgumentError(
        "--allow_node_ids in an --admission=open swarm names the hosts trusted from the start "
        "under --probation_iterations (an open swarm admits everybody); give that too, or use "
        "--admission=invite or allowlist");
  }
  out->set_join_work_bits(join_work_bits);
  out->set_probation_iterations(probation_iterations);
  return absl::OkStatus();
}

absl::StatusOr<membership::AdmissionPolicy> AdmissionPolicyOf(const VerifiedManifest& v) {
  membership::AdmissionPolicy p;
  SS_ASSIGN_OR_RETURN(p.mode, membership::ParseAdmissionMode(v.manifest.admission().policy()));
  proto::ManifestAdmission costs;
  costs.set_policy(v.manifest.admission().policy());
  if (absl::Status s = WriteNewcomerCosts(v.manifest.admission().join_work_bits(),
                                          v.manifest.admission().probation_iterations(), &costs);
      !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("swarm manifest ", v.sha256.substr(0, 12),
                                                   ": ", s.message()));
  }
  p.join_work_bits = costs.join_work_bits();
  p.probation_iterations = costs.probation_iterations();
  p.manifest_id = v.sha256;
  p.swarm_name = v.manifest.admission().swarm_name();
  p.founder_public_key = v.signed_manifest.founder_public_key();
  for (const std::string& bytes : v.manifest.admission().allowed_ids()) {
    absl::StatusOr<common::NodeId> id = common::NodeId::FromBytes(bytes);
    if (!id.ok()) return absl::InvalidArgumentError("swarm manifest's allow-list is malformed");
    p.allowed_ids.insert(*id);
  }
  return p;
}

absl::StatusOr<proto::SignedInvite> ReadInviteFlag(absl::string_view invite_flag) {
  std::string token(absl::StripAsciiWhitespace(invite_flag));
  if (!absl::StartsWith(token, "ssinv1.")) {
    std::ifstream in(token);
    if (!in) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--invite=", token, " is neither an invite token (ssinv1.…) nor a readable file"));
    }
    std::stringstream text;
    text << in.rdbuf();
    token = std::string(absl::StripAsciiWhitespace(text.str()));
  }
  absl::StatusOr<proto::SignedInvite> decoded = membership::DecodeInvite(token);
  if (!decoded.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--invite: ", decoded.status().message()));
  }
  return decoded;
}

absl::StatusOr<proto::SignedInvite> CheckOwnAdmission(const membership::AdmissionPolicy& policy,
                                                      const common::NodeId& self,
                                                      absl::string_view invite_flag,
                                                      absl::Time now) {
  proto::SignedInvite invite;
  if (policy.mode == membership::AdmissionMode::kOpen) return invite;
  // The founder and listed ids need none (and an allowlist swarm reads none).
  if (membership::CheckAdmission(policy, self, invite, now).ok()) return invite;
  if (!invite_flag.empty()) {
    SS_ASSIGN_OR_RETURN(invite, ReadInviteFlag(invite_flag));
  }
  absl::Status admitted = membership::CheckAdmission(policy, self, invite, now);
  if (!admitted.ok()) {
    return absl::PermissionDeniedError(absl::StrCat(
        "[admission] this swarm (admission: ", membership::AdmissionModeName(policy.mode),
        ") would refuse this node: ", admitted.message()));
  }
  return invite;
}

}  // namespace skipswarm::manifest
