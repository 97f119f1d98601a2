#include "common/atomic_file.h"
#include "identity/identity.h"
#include "identity/test_identity.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>

#include "gtest/gtest.h"
#include "identity/keygen_command.h"

namespace skipswarm::identity {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

TEST(IdentityTest, IdIsSha256OfRawPublicKey) {
  auto identity = Identity::Generate();
  ASSERT_TRUE(identity.ok()) << identity.status();
  EXPECT_EQ((*identity)->public_key().size(), kPublicKeyBytes);
  EXPECT_EQ((*identity)->id(),
            common::NodeId::FromPublicKey((*identity)->public_key()));
}

TEST(IdentityTest, SignAndVerify) {
  auto identity = TestIdentity('\x07');
  auto sig = identity->Sign("hello");
  ASSERT_TRUE(sig.ok());
  EXPECT_EQ(sig->size(), kSignatureBytes);
  EXPECT_TRUE(VerifySignature(identity->public_key(), "hello", *sig).ok());
  EXPECT_EQ(VerifySignature(identity->public_key(), "hellO", *sig).code(),
            absl::StatusCode::kUnauthenticated);
  auto other = TestIdentity('\x08');
  EXPECT_FALSE(VerifySignature(other->public_key(), "hello", *sig).ok());
  EXPECT_FALSE(VerifySignature("short", "hello", *sig).ok());
  EXPECT_FALSE(VerifySignature(identity->public_key(), "hello", "x").ok());
}

TEST(IdentityTest, SeedIsDeterministic) {
  auto a = *Identity::FromSeed(std::string(32, 'a'));
  auto b = *Identity::FromSeed(std::string(32, 'a'));
  EXPECT_EQ(a->id(), b->id());
  EXPECT_FALSE(Identity::FromSeed("short").ok());
}

TEST(IdentityTest, SaveLoadRoundTripWith0600) {
  const std::string path = TempPath("roundtrip.key");
  std::remove(path.c_str());
  auto identity = *Identity::Generate();
  ASSERT_TRUE(identity->Save(path).ok());
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto loaded = Identity::Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->id(), identity->id());
  // Refuses to clobber an identity unless asked.
  auto other = *Identity::Generate();
  const absl::Status refused = other->Save(path);
  EXPECT_EQ(refused.code(), absl::StatusCode::kAlreadyExists);
  // The hint names keygen's real flag (it once said --overwrite, which does not exist).
  EXPECT_NE(refused.message().find("--overwrite_key "), std::string::npos) << refused;
  EXPECT_TRUE(other->Save(path, /*overwrite=*/true).ok());
  EXPECT_EQ((*Identity::Load(path))->id(), other->id());
}

TEST(IdentityTest, LoadRejectsMissingWorldReadableAndGarbage) {
  EXPECT_EQ(Identity::Load(TempPath("missing.key")).status().code(),
            absl::StatusCode::kNotFound);
  const std::string path = TempPath("open.key");
  std::remove(path.c_str());
  ASSERT_TRUE((*Identity::Generate())->Save(path).ok());
  chmod(path.c_str(), 0644);
  auto status = Identity::Load(path).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("chmod 600"), std::string::npos);

  const std::string junk = TempPath("junk.key");
  ASSERT_TRUE(common::WriteFileAtomically(junk, "not a key", 0600).ok());
  EXPECT_EQ(Identity::Load(junk).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(IdentityTest, LoadOrCreateKeepsTheSameId) {
  const std::string path = TempPath("persist.key");
  std::remove(path.c_str());
  auto first = Identity::LoadOrCreate(path);
  auto second = Identity::LoadOrCreate(path);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ((*first)->id(), (*second)->id());
}

TEST(IdentityTest, CertificateCarriesTheSameKey) {
  auto identity = *Identity::Generate();
  auto pem = identity->SelfSignedCertificatePem(absl::FromUnixSeconds(1.8e9));
  ASSERT_TRUE(pem.ok()) << pem.status();
  EXPECT_NE(pem->find("BEGIN CERTIFICATE"), std::string::npos);
  auto key = PublicKeyFromCertificatePem(*pem);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(*key, identity->public_key());
  EXPECT_FALSE(PublicKeyFromCertificatePem("garbage").ok());
}

TEST(KeygenTest, WritesKeyAndCertificateAndShowsId) {
  KeygenOptions options;
  options.key_file = TempPath("keygen.key");
  options.cert_file = TempPath("keygen.crt");
  std::remove(options.key_file.c_str());
  auto out = RunKeygen(options, absl::FromUnixSeconds(1.8e9));
  ASSERT_TRUE(out.ok()) << out.status();
  auto id = (*Identity::Load(options.key_file))->id().Hex();
  EXPECT_NE(out->find(id), std::string::npos);
  EXPECT_FALSE(RunKeygen(options, absl::UnixEpoch()).ok());  // exists
  options.show = true;
  auto shown = RunKeygen(options, absl::UnixEpoch());
  ASSERT_TRUE(shown.ok());
  EXPECT_NE(shown->find(id), std::string::npos);
  EXPECT_EQ(KeygenCommand().name, "keygen");
}

}  // namespace
}  // namespace skipswarm::identity
