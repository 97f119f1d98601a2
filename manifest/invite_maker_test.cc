#include "manifest/invite_maker.h"

#include <cstdlib>

#include "gtest/gtest.h"
#include "identity/identity.h"
#include "identity/test_identity.h"
#include "membership/admission.h"

namespace skipswarm::manifest {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1'800'000'000);
const std::string kNonce(membership::kInviteNonceBytes, 'n');

TEST(InviteMakerTest, ExpiryIsADurationOrATimeInTheFuture) {
  EXPECT_EQ(*ParseExpiry("720h", kNow), kNow + absl::Hours(720));
  EXPECT_EQ(*ParseExpiry("2027-01-15T09:00:00Z", kNow), kNow + absl::Hours(1));
  EXPECT_FALSE(ParseExpiry("-1h", kNow).ok());
  EXPECT_FALSE(ParseExpiry("2020-01-01T00:00:00Z", kNow).ok());
  EXPECT_FALSE(ParseExpiry("soon", kNow).ok());
}

TEST(InviteMakerTest, TokenIsSignedByTheKeyFileAndBoundToTheNode) {
  const std::string key_file = std::string(std::getenv("TEST_TMPDIR")) + "/founder.key";
  auto founder = identity::TestIdentity('f');
  ASSERT_TRUE(founder->Save(key_file, /*overwrite=*/true).ok());
  auto joiner = identity::TestIdentity('j');
  absl::StatusOr<std::string> token =
      MakeInvite({key_file, "s", "1h", joiner->id().Hex()}, kNow, kNonce);
  ASSERT_TRUE(token.ok()) << token.status();
  membership::AdmissionPolicy p;
  p.mode = membership::AdmissionMode::kInvite;
  p.swarm_name = "s";
  p.founder_public_key = founder->public_key();
  const proto::SignedInvite invite = *membership::DecodeInvite(*token);
  EXPECT_TRUE(membership::CheckAdmission(p, joiner->id(), invite, kNow).ok());
  EXPECT_FALSE(membership::CheckAdmission(p, joiner->id(), invite, kNow + absl::Hours(1)).ok());
  EXPECT_FALSE(membership::CheckAdmission(p, common::NodeId::ForName("x"), invite, kNow).ok());
  EXPECT_NE(MakeInvite({"", "s", "1h", ""}, kNow, kNonce).status().message().find(
                "--node_key_file is required"),
            std::string::npos);
  EXPECT_NE(MakeInvite({key_file, "s", "1h", "xyz"}, kNow, kNonce).status().message().find(
                "is not a node id"),
            std::string::npos);
}

}  // namespace
}  // namespace skipswarm::manifest
