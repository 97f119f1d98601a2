#include "common/atomic_file.h"
#include "manifest/revocation_maker.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/node_id.h"
#include "common/status_macros.h"
#include "identity/identity.h"
#include "membership/admission.h"
#include "membership/revocation.h"

namespace skipswarm::manifest {
namespace {

// What one entry names: a node id or an invite id, as raw bytes.
struct Entry {
  std::string bytes;
  bool node = false;
};

absl::StatusOr<Entry> ParseEntry(const std::string& entry) {
  if (absl::StartsWith(entry, "ssinv1.")) {
    absl::StatusOr<proto::SignedInvite> invite = membership::DecodeInvite(entry);
    if (!invite.ok()) {
      return invite.status();
    }
    std::string id = membership::InviteId(*invite);
    if (id.size() != membership::kInviteNonceBytes) {
      return absl::InvalidArgumentError("that invite token carries no invite id");
    }
    return Entry{std::move(id), false};
  }
  const bool hex = !entry.empty() && entry.size() % 2 == 0 &&
                   std::all_of(entry.begin(), entry.end(),
                               [](char c) { return absl::ascii_isxdigit(c); });
  if (hex) {
    std::string bytes = absl::HexStringToBytes(entry);
    if (bytes.size() == 32) return Entry{std::move(bytes), true};
    if (bytes.size() == membership::kInviteNonceBytes) return Entry{std::move(bytes), false};
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "'", entry.substr(0, 80),
      "' is neither a node id (64 hex digits), an invite id (32 hex digits, printed by "
      "`skipswarm invite`) nor an invite token (ssinv1.…)"));
}

}  // namespace

absl::StatusOr<proto::SignedRevocationList> ReadRevocationsFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read revocation list ", path));
  std::string text(membership::kMaxRevocationListBytes * 2, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  absl::StatusOr<proto::SignedRevocationList> list = membership::DecodeRevocations(text);
  if (!list.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", list.status().message()));
  }
  return list;
}

absl::StatusOr<RevokeResult> Revoke(const RevokeRequest& request, absl::Time now) {
  if (request.key_file.empty()) {
    return absl::InvalidArgumentError(
        "--node_key_file is required: the founder's node key (the one that signed the swarm "
        "manifest) signs the revocation list");
  }
  if (request.list_file.empty()) {
    return absl::InvalidArgumentError(
        "--revocations_file is required: the list to extend (created when missing), which "
        "the swarm's daemons load with --revocations_file");
  }
  if (request.entries.empty()) {
    return absl::InvalidArgumentError(
        "name what to revoke: node ids, invite ids or invite tokens");
  }
  SS_ASSIGN_OR_RETURN(std::unique_ptr<identity::Identity> founder,
                      identity::Identity::Load(request.key_file));
  membership::AdmissionPolicy policy;
  policy.swarm_name = request.swarm_name;
  policy.founder_public_key = founder->public_key();
  proto::RevocationList list;
  list.set_swarm_name(request.swarm_name);
  if (std::ifstream(request.list_file).good()) {
    SS_ASSIGN_OR_RETURN(proto::SignedRevocationList old, ReadRevocationsFile(request.list_file));
    absl::StatusOr<membership::RevocationSet> checked = VerifyRevocations(old, policy);
    if (!checked.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(request.list_file, " is not this founder's list for swarm '",
                       request.swarm_name, "': ", checked.status().message()));
    }
    list.ParseFromString(old.list());
  }
  absl::flat_hash_set<std::string> nodes(list.node_ids().begin(), list.node_ids().end());
  absl::flat_hash_set<std::string> invites(list.invite_ids().begin(), list.invite_ids().end());
  RevokeResult result;
  for (const std::string& entry : request.entries) {
    SS_ASSIGN_OR_RETURN(Entry parsed, ParseEntry(entry));
    const std::string& bytes = parsed.bytes;
    const bool is_node = parsed.node;
    if (is_node && bytes == founder->id().Bytes()) {
      return absl::InvalidArgumentError("the founder cannot revoke itself");
    }
    if (is_node && nodes.insert(bytes).second) {
      list.add_node_ids(bytes);
      ++result.added;
    } else if (!is_node && invites.insert(bytes).second) {
      list.add_invite_ids(bytes);
      ++result.added;
    }
  }
  list.set_serial(list.serial() + 1);
  list.set_issued_unix_ms(absl::ToUnixMillis(now));
  SS_ASSIGN_OR_RETURN(result.list, membership::SignRevocations(*founder, list));
  result.serial = list.serial();
  result.total = list.node_ids_size() + list.invite_ids_size();
  SS_RETURN_IF_ERROR(common::WriteFileAtomically(
      request.list_file, absl::StrCat(membership::EncodeRevocations(result.list), "\n")));
  return result;
}

}  // namespace skipswarm::manifest
