#include "manifest/join_challenge.h"

#include <algorithm>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/sha256.h"

namespace skipswarm::manifest {
namespace {

// Domain separation (Note [Admission] in membership/admission.h): the node
// key also signs records, invites and manifests.
constexpr char kSignContext[] = "skipswarm manifest challenge v1|";
constexpr char kMacContext[] = "skipswarm challenge mac v1|";
constexpr size_t kMacHex = 64;
constexpr size_t kMaxBucketDigits = 20;

uint64_t BucketOf(absl::Duration now) {
  if (now < absl::ZeroDuration()) return 0;
  return static_cast<uint64_t>(absl::IDivDuration(now, kJoinChallengeBucket, &now));
}

}  // namespace

std::string JoinChallenges::Mac(uint64_t bucket, absl::string_view swarm_id) const {
  const std::string data = absl::StrCat(kMacContext, bucket, "|", swarm_id);
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len) ==
      nullptr) {
    return "";  // taken by no Fresh: a challenge never has an empty hash
  }
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(out), len));
}

std::string JoinChallenges::Issue(absl::string_view swarm_id, absl::Duration now) const {
  const uint64_t bucket = BucketOf(now);
  return absl::StrCat(bucket, "/", Mac(bucket, swarm_id));
}

bool JoinChallenges::Fresh(absl::string_view challenge, absl::string_view swarm_id,
                           absl::Duration now) const {
  const std::optional<uint64_t> bucket = ParseJoinChallenge(challenge);
  if (!bucket.has_value()) return false;
  const uint64_t current = BucketOf(now);
  if (*bucket != current && (current == 0 || *bucket != current - 1)) return false;
  const std::string mac = Mac(*bucket, swarm_id);
  const absl::string_view given = challenge.substr(challenge.size() - kMacHex);
  return mac.size() == kMacHex && CRYPTO_memcmp(mac.data(), given.data(), kMacHex) == 0;
}

absl::StatusOr<std::string> NewJoinChallengeSecret() {
  std::string secret(32, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(secret.data()),
                 static_cast<int>(secret.size())) != 1) {
    return absl::InternalError("no randomness from OpenSSL for the join challenges' secret");
  }
  return secret;
}

bool IsLowerHex64(absl::string_view s) {
  return s.size() == kMacHex && std::all_of(s.begin(), s.end(), [](char c) {
           return absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f');
         });
}

std::optional<uint64_t> ParseJoinChallenge(absl::string_view value) {
  if (value.size() < kMacHex + 2 || value.size() > kMaxJoinChallengeBytes) return std::nullopt;
  const size_t slash = value.size() - kMacHex - 1;
  if (value[slash] != '/' || slash > kMaxBucketDigits) return std::nullopt;
  const absl::string_view digits = value.substr(0, slash);
  for (char c : digits) {
    if (!absl::ascii_isdigit(c)) return std::nullopt;  // no sign, no space
  }
  if (!IsLowerHex64(value.substr(slash + 1))) return std::nullopt;
  uint64_t bucket = 0;
  if (!absl::SimpleAtoi(digits, &bucket)) return std::nullopt;  // past 64 bits
  return bucket;
}

std::string JoinChallengeMessage(absl::string_view swarm_id, absl::string_view node_id,
                                 absl::string_view challenge) {
  // Fixed widths but the last field: no two field lists give one message.
  return absl::StrCat(kSignContext, common::Sha256(swarm_id), node_id, challenge);
}

absl::StatusOr<std::string> SignJoinChallenge(const identity::Identity& key,
                                              absl::string_view swarm_id,
                                              absl::string_view challenge) {
  return key.Sign(JoinChallengeMessage(swarm_id, key.id().Bytes(), challenge));
}

}  // namespace skipswarm::manifest
