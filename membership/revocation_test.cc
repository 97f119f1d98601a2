#include "membership/revocation.h"

#include "gtest/gtest.h"
#include "identity/test_identity.h"

namespace skipswarm::membership {
namespace {

const std::string kNonce(kInviteNonceBytes, 'n');

class RevocationTest : public ::testing::Test {
 protected:
  RevocationTest()
      : founder_(identity::TestIdentity('f')),
        alice_(identity::TestIdentity('a')),
        mallory_(identity::TestIdentity('m')) {
    policy_.mode = AdmissionMode::kInvite;
    policy_.swarm_name = "swarm";
    policy_.founder_public_key = founder_->public_key();
  }
  proto::RevocationList List(uint64_t serial) {
    proto::RevocationList l;
    l.set_swarm_name("swarm");
    l.set_serial(serial);
    return l;
  }

  std::unique_ptr<identity::Identity> founder_, alice_, mallory_;
  AdmissionPolicy policy_;
};

TEST_F(RevocationTest, RevokesNodesAndInvitesItNames) {
  proto::SignedInvite alices =
      *MintInvite(*founder_, {"swarm", absl::InfiniteFuture(), alice_->id()}, kNonce);
  proto::SignedInvite other = *MintInvite(
      *founder_, {"swarm", absl::InfiniteFuture(), std::nullopt}, std::string(16, 'o'));
  proto::RevocationList l = List(3);
  l.add_node_ids(mallory_->id().Bytes());
  l.add_invite_ids(InviteId(alices));
  absl::StatusOr<proto::SignedRevocationList> signed_list = SignRevocations(*founder_, l);
  ASSERT_TRUE(signed_list.ok()) << signed_list.status();
  // Through its text form, as `skipswarm revoke` writes it.
  absl::StatusOr<proto::SignedRevocationList> decoded =
      DecodeRevocations(EncodeRevocations(*signed_list) + "\n");
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(PeekRevocationSerial(*decoded), 3u);
  absl::StatusOr<RevocationSet> set = VerifyRevocations(*decoded, policy_);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->serial, 3u);
  EXPECT_EQ(set->size(), 2u);
  EXPECT_TRUE(set->Revokes(mallory_->id(), proto::SignedInvite()));
  EXPECT_TRUE(set->Revokes(alice_->id(), alices));  // her invite is out
  EXPECT_FALSE(set->Revokes(alice_->id(), other));  // another invite still admits her
  EXPECT_FALSE(set->Revokes(founder_->id(), proto::SignedInvite()));
  EXPECT_FALSE(RevocationSet().Revokes(mallory_->id(), proto::SignedInvite()));
}

TEST_F(RevocationTest, RefusesForgedForeignAndMalformedLists) {
  proto::RevocationList l = List(1);
  l.add_node_ids(alice_->id().Bytes());
  // Signed by someone else.
  absl::StatusOr<RevocationSet> forged =
      VerifyRevocations(*SignRevocations(*mallory_, l), policy_);
  EXPECT_EQ(forged.status().code(), absl::StatusCode::kUnauthenticated) << forged.status();
  // Another swarm's list.
  proto::RevocationList other = l;
  other.set_swarm_name("other");
  absl::StatusOr<RevocationSet> foreign =
      VerifyRevocations(*SignRevocations(*founder_, other), policy_);
  EXPECT_EQ(foreign.status().code(), absl::StatusCode::kInvalidArgument) << foreign.status();
  EXPECT_NE(foreign.status().message().find("for swarm 'other'"), std::string::npos);
  // No founder key to check against.
  AdmissionPolicy keyless;
  keyless.swarm_name = "swarm";
  EXPECT_EQ(VerifyRevocations(*SignRevocations(*founder_, l), keyless).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // A signed list whose bytes were altered.
  proto::SignedRevocationList tampered = *SignRevocations(*founder_, l);
  tampered.mutable_list()->back() ^= 1;
  EXPECT_FALSE(VerifyRevocations(tampered, policy_).ok());
  // Oversized: refused before any signature check, and never signed.
  proto::SignedRevocationList huge;
  huge.set_list(std::string(kMaxRevocationListBytes + 1, 'x'));
  EXPECT_EQ(VerifyRevocations(huge, policy_).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PeekRevocationSerial(huge), 0u);
  proto::RevocationList big = List(1);
  for (int i = 0; i < 2000; ++i) big.add_node_ids(alice_->id().Bytes());
  EXPECT_EQ(SignRevocations(*founder_, big).status().code(), absl::StatusCode::kInvalidArgument);
  // Malformed entries and serials.
  proto::RevocationList bad = List(1);
  bad.add_node_ids("short");
  EXPECT_FALSE(SignRevocations(*founder_, bad).ok());
  EXPECT_FALSE(SignRevocations(*founder_, List(0)).ok());
  // Text that is not a list.
  for (const char* text : {"", "ssrev1.", "ssrev1.!!!", "ssinv1.AAAA", "ssrev1.AAAA"}) {
    EXPECT_FALSE(DecodeRevocations(text).ok()) << text;
  }
  EXPECT_FALSE(DecodeRevocations(std::string(200000, 'a')).ok());
}

TEST_F(RevocationTest, InviteIdIsTheNonce) {
  proto::SignedInvite inv =
      *MintInvite(*founder_, {"swarm", absl::InfiniteFuture(), std::nullopt}, kNonce);
  EXPECT_EQ(InviteId(inv), kNonce);
  EXPECT_EQ(InviteId(proto::SignedInvite()), "");
  proto::SignedInvite junk;
  junk.set_invite("\xff\xff");
  EXPECT_EQ(InviteId(junk), "");
}

}  // namespace
}  // namespace skipswarm::membership
