#include "common/sha256.h"

#include <openssl/evp.h>

#include <memory>

#include "glog/logging.h"

namespace skipswarm::common {
namespace {

// Runs `feed` with an update function for the bytes, then returns the digest. Our own arguments
// only: a failure here is an OpenSSL allocation failure.
template <typename Feed>
std::string Digest(Feed feed) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(),
                                                              &EVP_MD_CTX_free);
  CHECK(ctx != nullptr && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) == 1);
  feed([&](absl::string_view bytes) {
    CHECK_EQ(EVP_DigestUpdate(ctx.get(), bytes.data(), bytes.size()), 1);
  });
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  CHECK_EQ(EVP_DigestFinal_ex(ctx.get(), digest, &size), 1);
  return std::string(reinterpret_cast<const char*>(digest), size);
}

}  // namespace

std::string Sha256(absl::string_view bytes) {
  return Digest([&](auto update) { update(bytes); });
}

std::string Sha256(const absl::Cord& payload) {
  return Digest([&](auto update) {
    for (absl::string_view chunk : payload.Chunks()) update(chunk);
  });
}

}  // namespace skipswarm::common
