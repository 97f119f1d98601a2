// A joiner's first step: fetch the swarm manifest from the --join targets,
// verify it, and when that fails say which step failed and how to fix it.
//
//   BootstrapOptions o;  o.credentials = creds;  o.swarm_id = id;  o.timeout = 30s;
//   SS_ASSIGN_OR_RETURN(VerifiedManifest m, FetchSwarmManifest(targets, o, &clock));
//
// Steps, each with its own message "<address>: [<step>] <what>; hint: <fix>"
// (ExplainBootstrapError):
//   address   missing port, URL, ... (join_target.h, before dialling)
//   dns       the host name does not resolve (checked before dialling)
//   tcp       refused / unreachable (retried until the timeout: the peer may
//             be starting)
//   timeout   no answer in time
//   http      an HTTP server answered: the metrics / status port was given
//             instead of the node port
//   tls       handshake failed (TLS against --insecure, or the reverse)
//   version   protocol version mismatch
//   busy      the peer's quota refused us (RESOURCE_EXHAUSTED: busy, or a
//             flood of unknown callers; retried with backoff until the
//             timeout, or at once with the join work an open swarm's
//             seed asked for, or with the signature of the challenge an
//             allow-list swarm's seed gave, Note [Manifest joiners] in
//             manifest_service.h)
//   admission the peer refused us (other --swarm_name / --swarm_secret)
//   manifest  the manifest does not verify (signature, size, pinned hash) or
//             the peer serves none (an older skipswarm)
// The other steps are final for that address; the next address is tried.
//
// Thread rule: FetchSwarmManifest blocks its caller (main's thread) for at
// most `timeout` plus one probe.
#ifndef SKIPSWARM_MANIFEST_BOOTSTRAP_H_
#define SKIPSWARM_MANIFEST_BOOTSTRAP_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/real_clock.h"
#include "identity/identity.h"
#include "identity/tls_credentials.h"
#include "manifest/join_target.h"
#include "manifest/manifest_service.h"
#include "manifest/signed_manifest.h"

namespace skipswarm::manifest {

struct BootstrapOptions {
  std::shared_ptr<const identity::PeerCredentials> credentials;
  std::string swarm_id;
  absl::Duration timeout = absl::Seconds(30);      // all addresses, all tries
  absl::Duration call_timeout = absl::Seconds(5);  // one GetManifest
  // Sent with every call: an invited joiner's proof (Note [Manifest
  // joiners] in manifest_service.h); empty: none.
  JoinerProof proof;
  // The joiner's raw public key: when a busy seed of an open swarm asks
  // join work (and, with a swarm file, for the pinned manifest), the
  // joiner solves it within the timeout and retries at once with it, the
  // work sent as `proof.public_key` / `proof.join_work`. Empty: never.
  std::string public_key;
  // The joiner's node key (borrowed; must outlive FetchSwarmManifest): when
  // a busy seed's refusal carries a challenge (a swarm that lets listed
  // ids in), the joiner signs it and retries at once with the signature,
  // its id and public key in `proof`. Null: never.
  const identity::Identity* signer = nullptr;
  // Jitter of the retries of a busy peer (so joiners refused together do
  // not retry together).
  uint64_t backoff_seed = 1;
};

// The step a failed GetManifest (or its verification) stopped at, with the
// HTTP probe for the connection-level failures.
std::string ClassifyBootstrapError(const absl::Status& status, const std::string& address);
// "<address>: [<step>] <message>; hint: <fix>", same code.
absl::Status ExplainBootstrapError(const absl::Status& status, const std::string& address);

// True when something at `address` answers a plain HTTP request with an
// HTTP status line within `timeout` (the metrics / status server does;
// a gRPC server does not).
bool AnswersHttp(const std::string& address, absl::Duration timeout);

// DNS resolution of the address's host: OK, or an explained [dns] error.
absl::Status ResolveJoinHost(const std::string& address);

// `join_work` (may be null): set to the nonce of the join work solved for
// the returned manifest when a busy seed asked for it (Note [Manifest
// joiners]), so the gossip step need not search again; untouched otherwise.
absl::StatusOr<VerifiedManifest> FetchSwarmManifest(const JoinTargets& targets,
                                                    const BootstrapOptions& options,
                                                    common::RealClock* clock,
                                                    uint64_t* join_work = nullptr);

}  // namespace skipswarm::manifest

#endif  // SKIPSWARM_MANIFEST_BOOTSTRAP_H_
