#include "membership/join_work.h"

#include <openssl/evp.h>

#include "absl/strings/str_cat.h"

namespace skipswarm::membership {
namespace {

// Note [Join work]: the hashed prefix, then the nonce. The prefix state is
// hashed once per solve and copied per nonce.
class WorkHasher {
 public:
  WorkHasher(absl::string_view manifest_id, absl::string_view public_key)
      : prefix_(EVP_MD_CTX_new()), ctx_(EVP_MD_CTX_new()) {
    constexpr absl::string_view kDomain = "skipswarm join work v1|";
    EVP_DigestInit_ex(prefix_, EVP_sha256(), nullptr);
    EVP_DigestUpdate(prefix_, kDomain.data(), kDomain.size());
    EVP_DigestUpdate(prefix_, manifest_id.data(), manifest_id.size());
    EVP_DigestUpdate(prefix_, "|", 1);
    EVP_DigestUpdate(prefix_, public_key.data(), public_key.size());
  }
  ~WorkHasher() {
    EVP_MD_CTX_free(ctx_);
    EVP_MD_CTX_free(prefix_);
  }
  WorkHasher(const WorkHasher&) = delete;
  WorkHasher& operator=(const WorkHasher&) = delete;

  // Leading zero bits of the work hash of `nonce`.
  int Bits(uint64_t nonce) {
    unsigned char le[8];
    for (int i = 0; i < 8; ++i) le[i] = static_cast<unsigned char>(nonce >> (8 * i));
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int size = 0;
    EVP_MD_CTX_copy_ex(ctx_, prefix_);
    EVP_DigestUpdate(ctx_, le, sizeof(le));
    EVP_DigestFinal_ex(ctx_, digest, &size);
    int bits = 0;
    for (unsigned int i = 0; i < size; ++i) {
      if (digest[i] == 0) {
        bits += 8;
        continue;
      }
      for (int b = 7; b >= 0 && !((digest[i] >> b) & 1); --b) ++bits;
      break;
    }
    return bits;
  }

 private:
  EVP_MD_CTX* prefix_;
  EVP_MD_CTX* ctx_;
};

}  // namespace

int JoinWorkBits(absl::string_view manifest_id, absl::string_view public_key, uint64_t nonce) {
  return WorkHasher(manifest_id, public_key).Bits(nonce);
}

bool NeedsJoinWork(const AdmissionPolicy& policy, const common::NodeId& id) {
  if (policy.mode != AdmissionMode::kOpen || policy.join_work_bits == 0) return false;
  return policy.founder_public_key.empty() ||
         common::NodeId::FromPublicKey(policy.founder_public_key) != id;
}

absl::Status CheckJoinWork(const AdmissionPolicy& policy, const common::NodeId& id,
                           absl::string_view public_key, uint64_t nonce) {
  if (!NeedsJoinWork(policy, id)) return absl::OkStatus();
  const int bits = JoinWorkBits(policy.manifest_id, public_key, nonce);
  if (bits >= static_cast<int>(policy.join_work_bits)) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      "node ", id.ShortString(), "'s record carries no valid join work (this open swarm asks ",
      policy.join_work_bits, " leading zero bits of the work hash over its swarm manifest ",
      policy.manifest_id.substr(0, 12), " and the node's key, Note [Join work]; its nonce ",
      nonce, " gives ", bits, "): a current skipswarm solves it when joining"));
}

absl::StatusOr<uint64_t> SolveJoinWork(absl::string_view manifest_id,
                                       absl::string_view public_key, uint32_t bits,
                                       uint64_t first, uint64_t max_tries) {
  if (bits > kMaxJoinWorkBits) {
    return absl::InvalidArgumentError(
        absl::StrCat("join work of ", bits, " bits (limit ", kMaxJoinWorkBits, ")"));
  }
  WorkHasher hasher(manifest_id, public_key);
  for (uint64_t tries = 0; tries < max_tries; ++tries) {
    const uint64_t nonce = first + tries;
    if (hasher.Bits(nonce) >= static_cast<int>(bits)) return nonce;
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "no join work of ", bits, " bits in ", max_tries, " tries"));
}

}  // namespace skipswarm::membership
