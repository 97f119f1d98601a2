#include "manifest/signed_manifest.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "identity/test_identity.h"
#include "proto/version.h"

namespace skipswarm::manifest {
namespace {

proto::SwarmManifest Sample() {
  proto::SwarmManifest m;
  m.set_format(kManifestFormat);
  m.set_protocol_version(proto::kProtocolVersion);
  m.mutable_model()->set_num_layers(4);
  m.mutable_admission()->set_swarm_name("s");
  return m;
}

TEST(SignedManifestTest, ASignedManifestVerifiesAndNamesItsFounder) {
  auto founder = identity::TestIdentity(1);
  auto s = SignManifest(Sample(), *founder);
  ASSERT_TRUE(s.ok()) << s.status();
  auto v = VerifyManifest(*s);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->founder, founder->id());
  EXPECT_EQ(v->manifest.model().num_layers(), 4);
  EXPECT_EQ(v->sha256, Sha256Hex(s->manifest()));
  EXPECT_EQ(v->sha256.size(), 64u);
  // Pinned to its own hash (a swarm file's): still fine.
  EXPECT_TRUE(VerifyManifest(*s, v->sha256).ok());
}

TEST(SignedManifestTest, ATamperedManifestIsUnauthenticated) {
  auto s = *SignManifest(Sample(), *identity::TestIdentity(1));
  proto::SwarmManifest m;
  ASSERT_TRUE(m.ParseFromString(s.manifest()));
  m.mutable_model()->set_num_layers(6);
  s.set_manifest(m.SerializeAsString());
  auto v = VerifyManifest(s);
  EXPECT_EQ(v.status().code(), absl::StatusCode::kUnauthenticated) << v.status();
  EXPECT_TRUE(absl::StrContains(v.status().message(), "signature")) << v.status();
}

TEST(SignedManifestTest, AnotherKeysSignatureIsRefusedEvenWhenTheKeyIsSwapped) {
  // A forger re-signs with its own key and presents that key: the founder
  // id inside the manifest no longer matches.
  auto s = *SignManifest(Sample(), *identity::TestIdentity(1));
  auto forger = identity::TestIdentity(2);
  s.set_signature(*forger->Sign(s.manifest()));
  s.set_founder_public_key(forger->public_key());
  auto v = VerifyManifest(s);
  EXPECT_EQ(v.status().code(), absl::StatusCode::kUnauthenticated) << v.status();
  EXPECT_TRUE(absl::StrContains(v.status().message(), "another founder")) << v.status();
}

TEST(SignedManifestTest, APinnedHashOfAnotherManifestIsRefused) {
  auto s = *SignManifest(Sample(), *identity::TestIdentity(1));
  auto v = VerifyManifest(s, std::string(64, 'a'));
  EXPECT_EQ(v.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(absl::StrContains(v.status().message(), "swarm file pins")) << v.status();
}

TEST(SignedManifestTest, HostileInputIsRefusedWithAReason) {
  auto founder = identity::TestIdentity(1);
  proto::SignedManifest empty;
  EXPECT_EQ(VerifyManifest(empty).status().code(), absl::StatusCode::kInvalidArgument);

  proto::SignedManifest huge = *SignManifest(Sample(), *founder);
  huge.set_manifest(std::string(kMaxManifestBytes + 1, 'x'));
  auto v = VerifyManifest(huge);
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(v.status().message(), "at most")) << v.status();

  proto::SignedManifest short_key = *SignManifest(Sample(), *founder);
  short_key.set_founder_public_key("abc");
  EXPECT_EQ(VerifyManifest(short_key).status().code(), absl::StatusCode::kUnauthenticated);

  // Validly signed garbage: parses as nothing.
  proto::SignedManifest garbage;
  garbage.set_manifest("\xff\xff\xff\xff garbage");
  garbage.set_founder_public_key(founder->public_key());
  garbage.set_signature(*founder->Sign(garbage.manifest()));
  v = VerifyManifest(garbage);
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument) << v.status();

  proto::SwarmManifest future = Sample();
  future.set_format(2);
  v = VerifyManifest(*SignManifest(future, *founder));
  EXPECT_TRUE(absl::StrContains(v.status().message(), "format 2")) << v.status();

  proto::SwarmManifest old_protocol = Sample();
  old_protocol.set_protocol_version(99);
  v = VerifyManifest(*SignManifest(old_protocol, *founder));
  EXPECT_TRUE(absl::StrContains(v.status().message(), "protocol version")) << v.status();
}

}  // namespace
}  // namespace skipswarm::manifest
