#include "membership/admission.h"

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace skipswarm::membership {
namespace {

constexpr char kTokenPrefix[] = "ssinv1.";

// Note [Admission]: domain separation from records and manifests.
std::string InviteSignedBytes(absl::string_view invite_bytes) {
  return absl::StrCat("skipswarm invite v1|", invite_bytes);
}

std::string Rfc3339(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

}  // namespace

absl::string_view AdmissionModeName(AdmissionMode mode) {
  switch (mode) {
    case AdmissionMode::kOpen: return "open";
    case AdmissionMode::kInvite: return "invite";
    case AdmissionMode::kAllowList: return "allowlist";
  }
  return "open";
}

absl::StatusOr<AdmissionMode> ParseAdmissionMode(absl::string_view name) {
  if (name.empty() || name == "open") return AdmissionMode::kOpen;
  if (name == "invite") return AdmissionMode::kInvite;
  if (name == "allowlist") return AdmissionMode::kAllowList;
  return absl::InvalidArgumentError(absl::StrCat(
      "admission policy '", name, "' is none of open, invite, allowlist"));
}

absl::StatusOr<proto::SignedInvite> MintInvite(const identity::Identity& founder,
                                               const InviteOptions& options,
                                               absl::string_view nonce) {
  if (nonce.size() != kInviteNonceBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("an invite nonce is ", kInviteNonceBytes, " bytes"));
  }
  if (options.swarm_name.empty()) {
    return absl::InvalidArgumentError("an invite names its swarm");
  }
  proto::Invite invite;
  invite.set_swarm_name(options.swarm_name);
  if (options.node_id) invite.set_node_id(options.node_id->Bytes());
  invite.set_expires_unix_ms(absl::ToUnixMillis(options.expires));
  invite.set_nonce(std::string(nonce));
  proto::SignedInvite out;
  if (!invite.SerializeToString(out.mutable_invite())) {
    return absl::InternalError("cannot serialize an invite");
  }
  SS_ASSIGN_OR_RETURN(*out.mutable_signature(), founder.Sign(InviteSignedBytes(out.invite())));
  return out;
}

std::string EncodeInvite(const proto::SignedInvite& invite) {
  return absl::StrCat(kTokenPrefix, absl::WebSafeBase64Escape(invite.SerializeAsString()));
}

absl::StatusOr<proto::SignedInvite> DecodeInvite(absl::string_view token) {
  if (token.size() > kMaxInviteTokenBytes) {
    return absl::InvalidArgumentError(absl::StrCat("invite token is ", token.size(),
                                                   " bytes (limit ", kMaxInviteTokenBytes, ")"));
  }
  if (!absl::ConsumePrefix(&token, kTokenPrefix)) {
    return absl::InvalidArgumentError(
        absl::StrCat("an invite token starts with '", kTokenPrefix,
                     "' (make one with `skipswarm invite`)"));
  }
  std::string bytes;
  if (!absl::WebSafeBase64Unescape(token, &bytes)) {
    return absl::InvalidArgumentError("invite token is not base64url (was it cut short?)");
  }
  proto::SignedInvite invite;
  if (!invite.ParseFromString(bytes) || invite.invite().empty()) {
    return absl::InvalidArgumentError("invite token does not parse (was it cut short?)");
  }
  return invite;
}

absl::Status CheckAdmission(const AdmissionPolicy& policy, const common::NodeId& id,
                            const proto::SignedInvite& signed_invite, absl::Time now) {
  if (policy.mode == AdmissionMode::kOpen) return absl::OkStatus();
  if (id == common::NodeId::FromPublicKey(policy.founder_public_key) ||
      policy.allowed_ids.contains(id)) {
    return absl::OkStatus();
  }
  if (policy.mode == AdmissionMode::kAllowList) {
    return absl::PermissionDeniedError(absl::StrCat(
        "node ", id.ShortString(), " is not on this swarm's allow-list (admission: allowlist)"));
  }
  if (signed_invite.invite().empty()) {
    return absl::PermissionDeniedError(absl::StrCat(
        "node ", id.ShortString(),
        " has no invite (this swarm admits by invitation: ask its founder for one made with "
        "`skipswarm invite` and pass it with --invite)"));
  }
  if (signed_invite.invite().size() > kMaxInviteTokenBytes ||
      !identity::VerifySignature(policy.founder_public_key,
                                 InviteSignedBytes(signed_invite.invite()),
                                 signed_invite.signature())
           .ok()) {
    return absl::PermissionDeniedError(absl::StrCat(
        "node ", id.ShortString(),
        "'s invite is forged: not signed by this swarm's founder key"));
  }
  proto::Invite invite;
  if (!invite.ParseFromString(signed_invite.invite())) {
    return absl::PermissionDeniedError(
        absl::StrCat("node ", id.ShortString(), "'s invite does not parse"));
  }
  if (invite.swarm_name() != policy.swarm_name) {
    return absl::PermissionDeniedError(absl::StrCat(
        "node ", id.ShortString(), "'s invite is for swarm '", invite.swarm_name(),
        "', not '", policy.swarm_name, "'"));
  }
  if (!invite.node_id().empty() && invite.node_id() != id.Bytes()) {
    absl::StatusOr<common::NodeId> bound = common::NodeId::FromBytes(invite.node_id());
    return absl::PermissionDeniedError(absl::StrCat(
        "node ", id.ShortString(), "'s invite is for another node (",
        bound.ok() ? bound->ShortString() : std::string("a malformed id"),
        "): use the node key it was made for"));
  }
  const absl::Time expires = absl::FromUnixMillis(invite.expires_unix_ms());
  if (now >= expires) {
    return absl::PermissionDeniedError(absl::StrCat(
        "node ", id.ShortString(), "'s invite expired at ", Rfc3339(expires),
        " (ask the founder for a fresh one)"));
  }
  return absl::OkStatus();
}

absl::Time AdmittedUntil(const AdmissionPolicy& policy, const common::NodeId& id,
                         const proto::SignedInvite& signed_invite) {
  if (policy.mode == AdmissionMode::kOpen ||
      id == common::NodeId::FromPublicKey(policy.founder_public_key) ||
      policy.allowed_ids.contains(id)) {
    return absl::InfiniteFuture();
  }
  proto::Invite invite;
  if (policy.mode != AdmissionMode::kInvite || signed_invite.invite().empty() ||
      !invite.ParseFromString(signed_invite.invite())) {
    return absl::InfinitePast();
  }
  return absl::FromUnixMillis(invite.expires_unix_ms());
}

}  // namespace skipswarm::membership
