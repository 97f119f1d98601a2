#include "manifest/manifest_admission.h"

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

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
  if (m == membership::AdmissionMode::kOpen && out->allowed_ids_size() > 0) {
    return absl::InvalidArgumentError(
        "--allow_node_ids needs --admission=invite or --admission=allowlist (an open swarm "
        "admits everybody)");
  }
  return absl::OkStatus();
}

absl::StatusOr<membership::AdmissionPolicy> AdmissionPolicyOf(const VerifiedManifest& v) {
  membership::AdmissionPolicy p;
  SS_ASSIGN_OR_RETURN(p.mode, membership::ParseAdmissionMode(v.manifest.admission().policy()));
  p.swarm_name = v.manifest.admission().swarm_name();
  p.founder_public_key = v.signed_manifest.founder_public_key();
  for (const std::string& bytes : v.manifest.admission().allowed_ids()) {
    absl::StatusOr<common::NodeId> id = common::NodeId::FromBytes(bytes);
    if (!id.ok()) return absl::InvalidArgumentError("swarm manifest's allow-list is malformed");
    p.allowed_ids.insert(*id);
  }
  return p;
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
    invite = *std::move(decoded);
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
