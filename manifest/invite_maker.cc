#include "manifest/invite_maker.h"

#include "absl/strings/str_cat.h"
#include "common/node_id.h"
#include "common/status_macros.h"
#include "identity/identity.h"
#include "membership/admission.h"

namespace skipswarm::manifest {

absl::StatusOr<absl::Time> ParseExpiry(absl::string_view text, absl::Time now) {
  absl::Time until;
  absl::Duration d;
  std::string error;
  if (absl::ParseDuration(text, &d)) {
    until = now + d;
  } else if (!absl::ParseTime(absl::RFC3339_full, text, &until, &error)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--expires=", text, " is neither a duration (720h) nor a time (2027-01-31T00:00:00Z)"));
  }
  if (until <= now) {
    return absl::InvalidArgumentError(absl::StrCat("--expires=", text, " is not in the future"));
  }
  return until;
}

absl::StatusOr<std::string> MakeInvite(const InviteRequest& request, absl::Time now,
                                       absl::string_view nonce) {
  if (request.key_file.empty()) {
    return absl::InvalidArgumentError(
        "--node_key_file is required: the founder's node key (the one that signed the swarm "
        "manifest) signs invites");
  }
  SS_ASSIGN_OR_RETURN(std::unique_ptr<identity::Identity> founder,
                      identity::Identity::Load(request.key_file));
  membership::InviteOptions o;
  o.swarm_name = request.swarm_name;
  SS_ASSIGN_OR_RETURN(o.expires, ParseExpiry(request.expires, now));
  if (!request.node_id.empty()) {
    absl::StatusOr<common::NodeId> id = common::NodeId::FromHex(request.node_id);
    if (!id.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--node_id=", request.node_id,
          " is not a node id (64 hex digits: `skipswarm keygen --show_key` prints it)"));
    }
    o.node_id = *id;
  }
  SS_ASSIGN_OR_RETURN(proto::SignedInvite invite, membership::MintInvite(*founder, o, nonce));
  return membership::EncodeInvite(invite);
}

}  // namespace skipswarm::manifest
