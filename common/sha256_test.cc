#include "common/sha256.h"

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"

namespace skipswarm::common {
namespace {

TEST(Sha256Test, KnownVectorAndACordInChunksHashesAsItsBytes) {
  // FIPS 180-2's "abc".
  EXPECT_EQ(absl::BytesToHexString(Sha256(absl::string_view("abc"))),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  absl::Cord cord;
  std::string whole;
  for (int i = 0; i < 100; ++i) {
    const std::string part(1000 + i, static_cast<char>('a' + i % 26));
    cord.Append(part);
    whole += part;
  }
  EXPECT_EQ(Sha256(cord), Sha256(absl::string_view(whole)));
  EXPECT_EQ(Sha256(absl::string_view()).size(), 32u);
}

}  // namespace
}  // namespace skipswarm::common
