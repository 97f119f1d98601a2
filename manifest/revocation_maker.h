// What `skipswarm revoke` does (Note [Revocation] in membership/revocation.h):
// the founder's node key re-signs the swarm's revocation list file with the
// given entries added and the serial raised by one; the daemons that load
// the file (--revocations_file) spread it to every member.
//
//   RevokeRequest r{"founder.key", "skipswarm", "revoked.txt", {node_id_hex, invite_token}};
//   SS_ASSIGN_OR_RETURN(RevokeResult done, Revoke(r, clock->Now()));
//
// Thread rule: free functions (Revoke reads the key file and reads and
// writes the list file).
#ifndef SKIPSWARM_MANIFEST_REVOCATION_MAKER_H_
#define SKIPSWARM_MANIFEST_REVOCATION_MAKER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/gossip.pb.h"

namespace skipswarm::manifest {

struct RevokeRequest {
  std::string key_file;    // the founder's --node_key_file (the manifest's signer)
  std::string swarm_name;  // --swarm_name of the swarm
  std::string list_file;   // the list to extend (created when missing)
  // Each: a node id (64 hex digits), an invite id (32 hex digits, printed
  // by `skipswarm invite`) or an invite token ("ssinv1.…").
  std::vector<std::string> entries;
};

struct RevokeResult {
  proto::SignedRevocationList list;
  uint64_t serial = 0;
  int added = 0;   // entries new to the list
  int total = 0;   // entries in the list
};

// Reads `list_file` (if it exists: it must be this founder's list for this
// swarm), adds the entries, signs the list with serial + 1 and writes it
// back (atomically: a temporary file renamed over it). InvalidArgument
// naming the entry or file that is wrong.
absl::StatusOr<RevokeResult> Revoke(const RevokeRequest& request, absl::Time now);

// Reads a list file written by Revoke (no signature check: members check).
absl::StatusOr<proto::SignedRevocationList> ReadRevocationsFile(const std::string& path);

}  // namespace skipswarm::manifest

#endif  // SKIPSWARM_MANIFEST_REVOCATION_MAKER_H_
