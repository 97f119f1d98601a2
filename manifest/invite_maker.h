// What `skipswarm invite` does (Note [Admission] in membership/admission.h):
// the founder's node key signs an invitation to its swarm, valid until a
// given time, optionally for one node id, printed as a token the joiner
// passes with --invite.
//
//   InviteRequest r{"founder.key", "skipswarm", "720h", node_id_hex};
//   SS_ASSIGN_OR_RETURN(std::string token, MakeInvite(r, clock->Now(), nonce16));
//
// Thread rule: free functions (MakeInvite reads the key file).
#ifndef SKIPSWARM_MANIFEST_INVITE_MAKER_H_
#define SKIPSWARM_MANIFEST_INVITE_MAKER_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace skipswarm::manifest {

struct InviteRequest {
  std::string key_file;    // the founder's --node_key_file (the manifest's signer)
  std::string swarm_name;  // --swarm_name of the swarm
  // How long from now ("720h", "90m") or until when (RFC 3339,
  // "YYYY-MM-DDTHH:MM:SSZ").
  std::string expires;
  std::string node_id;     // hex; empty: any one node key that holds the token
};

// "until" in `ParseExpiry`'s two forms; InvalidArgument unless after `now`.
absl::StatusOr<absl::Time> ParseExpiry(absl::string_view text, absl::Time now);

// The token ("ssinv1.…"); `nonce`: membership::kInviteNonceBytes random bytes.
absl::StatusOr<std::string> MakeInvite(const InviteRequest& request, absl::Time now,
                                       absl::string_view nonce);

}  // namespace skipswarm::manifest

#endif  // SKIPSWARM_MANIFEST_INVITE_MAKER_H_
