// What `--join` names: bootstrap addresses (HOST:PORT, [IPv6]:PORT) and
// swarm files (swarm_file.h), comma-separated, checked before anything is
// dialled so the commonest mistakes get their own message and fix.
//
//   SS_ASSIGN_OR_RETURN(JoinTargets t, ParseJoinFlag("swarm.json,10.0.0.5:7000"));
//   // t.addresses: the file's bootstrap list, then 10.0.0.5:7000;
//   // t.pinned_sha256: the file's manifest hash.
//
// Errors read "<entry>: [address] <what>; hint: <fix>" (the bootstrap
// error format, bootstrap.h).
//
// Thread rule: pure functions (ParseJoinFlag reads the files it names).
#ifndef SKIPSWARM_MANIFEST_JOIN_TARGET_H_
#define SKIPSWARM_MANIFEST_JOIN_TARGET_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace skipswarm::manifest {

struct JoinTargets {
  std::vector<std::string> addresses;  // in order, duplicates removed
  std::string pinned_sha256;           // from a swarm file; empty: none
  std::string swarm_name;              // from a swarm file; empty: none
};

// InvalidArgument, explained, for a URL ("http://..."), a missing or
// non-numeric port, a port outside 1..65535, an empty host, or an IPv6
// address without brackets.
absl::Status CheckJoinAddress(absl::string_view address);

// Splits the flag at commas. An entry ending in ".json", or naming an
// existing file, is a swarm file: its addresses are added and its hash
// pinned (two files pinning different hashes are refused).
absl::StatusOr<JoinTargets> ParseJoinFlag(absl::string_view flag);

// "host" of "host:port" / "[v6]:port" (brackets removed) and the port.
// REQUIRES: CheckJoinAddress(address).ok().
std::pair<std::string, std::string> SplitHostPort(absl::string_view address);

}  // namespace skipswarm::manifest

#endif  // SKIPSWARM_MANIFEST_JOIN_TARGET_H_
