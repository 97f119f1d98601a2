#include "membership/revocation.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace skipswarm::membership {
namespace {

constexpr char kTextPrefix[] = "ssrev1.";

// Note [Revocation]: domain separation from records, invites and manifests.
std::string SignedBytes(absl::string_view list_bytes) {
  return absl::StrCat("skipswarm revocations v1|", list_bytes);
}

absl::Status CheckEntries(const proto::RevocationList& list) {
  for (const std::string& id : list.node_ids()) {
    if (!common::NodeId::FromBytes(id).ok()) {
      return absl::InvalidArgumentError("revocation list names a malformed node id");
    }
  }
  for (const std::string& invite : list.invite_ids()) {
    if (invite.size() != kInviteNonceBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "revocation list names a malformed invite id (", kInviteNonceBytes, " bytes)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

bool RevocationSet::Revokes(const common::NodeId& id, const proto::SignedInvite& invite) const {
  if (serial == 0) return false;
  if (nodes.contains(id)) return true;
  if (invites.empty() || invite.invite().empty()) return false;
  return invites.contains(InviteId(invite));
}

std::string InviteId(const proto::SignedInvite& signed_invite) {
  proto::Invite invite;
  if (signed_invite.invite().empty() || signed_invite.invite().size() > kMaxInviteTokenBytes ||
      !invite.ParseFromString(signed_invite.invite())) {
    return "";
  }
  return invite.nonce();
}

absl::StatusOr<proto::SignedRevocationList> SignRevocations(const identity::Identity& founder,
                                                            const proto::RevocationList& list) {
  if (list.swarm_name().empty()) {
    return absl::InvalidArgumentError("a revocation list names its swarm");
  }
  if (list.serial() == 0) return absl::InvalidArgumentError("a revocation list's serial is >= 1");
  SS_RETURN_IF_ERROR(CheckEntries(list));
  proto::SignedRevocationList out;
  if (!list.SerializeToString(out.mutable_list())) {
    return absl::InternalError("cannot serialize a revocation list");
  }
  if (out.list().size() > kMaxRevocationListBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "revocation list of ", list.node_ids_size() + list.invite_ids_size(), " entries is ",
        out.list().size(), " bytes (limit ", kMaxRevocationListBytes, ")"));
  }
  SS_ASSIGN_OR_RETURN(*out.mutable_signature(), founder.Sign(SignedBytes(out.list())));
  return out;
}

uint64_t PeekRevocationSerial(const proto::SignedRevocationList& signed_list) {
  if (signed_list.list().empty() || signed_list.list().size() > kMaxRevocationListBytes) return 0;
  proto::RevocationList list;
  if (!list.ParseFromString(signed_list.list())) return 0;
  return list.serial();
}

absl::StatusOr<RevocationSet> VerifyRevocations(const proto::SignedRevocationList& signed_list,
                                                const AdmissionPolicy& policy) {
  if (signed_list.list().size() > kMaxRevocationListBytes) {
    return absl::InvalidArgumentError(absl::StrCat("revocation list is ", signed_list.list().size(),
                                                   " bytes (limit ", kMaxRevocationListBytes, ")"));
  }
  if (policy.founder_public_key.empty()) {
    return absl::FailedPreconditionError(
        "this swarm has no founder key to check a revocation list against");
  }
  if (!identity::VerifySignature(policy.founder_public_key, SignedBytes(signed_list.list()),
                                 signed_list.signature())
           .ok()) {
    return absl::UnauthenticatedError(
        "revocation list is not signed by this swarm's founder key");
  }
  proto::RevocationList list;
  if (!list.ParseFromString(signed_list.list())) {
    return absl::InvalidArgumentError("revocation list does not parse");
  }
  if (list.swarm_name() != policy.swarm_name) {
    return absl::InvalidArgumentError(absl::StrCat("revocation list is for swarm '",
                                                   list.swarm_name(), "', not '",
                                                   policy.swarm_name, "'"));
  }
  if (list.serial() == 0) return absl::InvalidArgumentError("revocation list has serial 0");
  SS_RETURN_IF_ERROR(CheckEntries(list));
  RevocationSet set;
  set.serial = list.serial();
  for (const std::string& id : list.node_ids()) set.nodes.insert(*common::NodeId::FromBytes(id));
  for (const std::string& invite : list.invite_ids()) set.invites.insert(invite);
  return set;
}

std::string EncodeRevocations(const proto::SignedRevocationList& signed_list) {
  return absl::StrCat(kTextPrefix, absl::WebSafeBase64Escape(signed_list.SerializeAsString()));
}

absl::StatusOr<proto::SignedRevocationList> DecodeRevocations(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  // base64 of the largest list, its signature and framing.
  if (text.size() > kMaxRevocationListBytes * 4 / 3 + 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("revocation list text is ", text.size(), " bytes: too long"));
  }
  if (!absl::ConsumePrefix(&text, kTextPrefix)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a revocation list starts with '", kTextPrefix, "' (make one with `skipswarm revoke`)"));
  }
  std::string bytes;
  if (!absl::WebSafeBase64Unescape(text, &bytes)) {
    return absl::InvalidArgumentError("revocation list is not base64url (was it cut short?)");
  }
  proto::SignedRevocationList out;
  if (!out.ParseFromString(bytes) || out.list().empty()) {
    return absl::InvalidArgumentError("revocation list does not parse (was it cut short?)");
  }
  return out;
}

}  // namespace skipswarm::membership
