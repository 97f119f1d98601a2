// Explains why talking to a peer failed, by step, with a fix-it hint:
// the first thing a user sees when `skipswarm node --join=...` fails.
//
//   absl::Status s = ExplainGossipError(raw_status, "seed.example.org:7000");
//   // UNAVAILABLE: seed.example.org:7000: [tcp] failed to connect ...;
//   //   hint: is a node listening there? check firewalls / port forwarding
//
// Thread rule: pure functions, thread-safe.
#ifndef SKIPSWARM_MEMBERSHIP_BOOTSTRAP_DIAGNOSTICS_H_
#define SKIPSWARM_MEMBERSHIP_BOOTSTRAP_DIAGNOSTICS_H_

#include <string>

#include "absl/status/status.h"

namespace skipswarm::membership {

enum class JoinStep {
  kDns,        // the host name does not resolve
  kTcp,        // nothing accepts connections there
  kTls,        // handshake failed (TLS vs --insecure, bad certificate)
  kIdentity,   // certificate key does not hash to the claimed node id
  kVersion,    // protocol version mismatch
  kSwarm,      // other swarm id / swarm secret
  kAdmission,  // the swarm's admission policy refuses us (Note [Admission])
  kTimeout,    // no answer in time
  kOther,
};

const char* JoinStepName(JoinStep step);
JoinStep ClassifyGossipError(const absl::Status& status);
std::string JoinStepHint(JoinStep step);
// Same code; message "<address>: [<step>] <original>; hint: <hint>".
absl::Status ExplainGossipError(const absl::Status& status,
                                const std::string& address);

}  // namespace skipswarm::membership

#endif  // SKIPSWARM_MEMBERSHIP_BOOTSTRAP_DIAGNOSTICS_H_
