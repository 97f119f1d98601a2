// The challenge a busy seed gives a joiner whose id is admitted without an
// invite (the founder, the allow-list), and the signature that answers it
// (Note [Manifest joiners] in manifest_service.h).
//
//   // Seed, once per process:
//   SS_ASSIGN_OR_RETURN(std::string secret, NewJoinChallengeSecret());
//   JoinChallenges challenges(secret);
//   std::string c = challenges.Issue(swarm_id, clock->SteadyNow());  // on a refusal
//   // Joiner, on a refusal carrying c (ParseJoinChallenge first):
//   SS_ASSIGN_OR_RETURN(std::string sig, SignJoinChallenge(key, swarm_id, c));
//   // Seed, on the retry: Fresh(c, swarm_id, now), then the signature:
//   VerifySignature(public_key, JoinChallengeMessage(swarm_id, node_id, c), sig);
//
// A challenge is "<bucket>/<64 lowercase hex>": the steady-clock bucket it
// was issued in and a keyed hash (HMAC-SHA256 under the seed's secret) of
// the bucket and the swarm id. The seed stores nothing per caller: it
// recomputes the hash, and takes the current bucket's and the previous
// one's.
//
// Thread rule: JoinChallenges is immutable and thread-safe; the free
// functions are pure (NewJoinChallengeSecret reads OpenSSL's random source).
#ifndef SKIPSWARM_MANIFEST_JOIN_CHALLENGE_H_
#define SKIPSWARM_MANIFEST_JOIN_CHALLENGE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "identity/identity.h"

namespace skipswarm::manifest {

// The trailing metadata key a busy seed's refusal carries the challenge in.
inline constexpr char kJoinChallengeKey[] = "skipswarm-join-challenge";
// How long one challenge is issued; it is taken for up to twice as long.
inline constexpr absl::Duration kJoinChallengeBucket = absl::Seconds(30);
// The longest well-formed challenge: 20 digits, '/', 64 hex.
inline constexpr size_t kMaxJoinChallengeBytes = 85;

class JoinChallenges {
 public:
  // `secret`: random bytes this process keeps (NewJoinChallengeSecret);
  // never sent. Another secret (another seed, or a restart) issues
  // challenges this one does not take.
  explicit JoinChallenges(std::string secret) : secret_(std::move(secret)) {}

  // The challenge for `swarm_id` at steady time `now`.
  std::string Issue(absl::string_view swarm_id, absl::Duration now) const;
  // Whether `challenge` is one Issue gave for `swarm_id` in the bucket of
  // `now` or the one before. Hostile input: a parse, then one keyed hash.
  bool Fresh(absl::string_view challenge, absl::string_view swarm_id, absl::Duration now) const;

 private:
  std::string Mac(uint64_t bucket, absl::string_view swarm_id) const;

  const std::string secret_;
};

// 32 random bytes from OpenSSL; Internal when it has none.
absl::StatusOr<std::string> NewJoinChallengeSecret();

// A metadata value parsed as hostile input: its bucket, or nullopt unless
// exactly "<1..20 digits>/<64 lowercase hex>" (the bucket fitting 64 bits).
std::optional<uint64_t> ParseJoinChallenge(absl::string_view value);

// Whether `s` is exactly 64 lowercase hex digits: a SHA-256 as the seed's
// asks write it (a challenge's keyed hash, a join-work ask's manifest id).
bool IsLowerHex64(absl::string_view s);

// The bytes a joiner signs: a fixed context (so no record, invite or
// manifest signature is one), the swarm id's hash, the joiner's 32-byte
// node id and the challenge.
std::string JoinChallengeMessage(absl::string_view swarm_id, absl::string_view node_id,
                                 absl::string_view challenge);
// `key`'s signature of JoinChallengeMessage for its own id.
absl::StatusOr<std::string> SignJoinChallenge(const identity::Identity& key,
                                              absl::string_view swarm_id,
                                              absl::string_view challenge);

}  // namespace skipswarm::manifest

#endif  // SKIPSWARM_MANIFEST_JOIN_CHALLENGE_H_
