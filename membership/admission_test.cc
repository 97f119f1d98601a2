#include "membership/admission.h"

#include "gtest/gtest.h"
#include "identity/test_identity.h"

namespace skipswarm::membership {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1'800'000'000);
const std::string kNonce(kInviteNonceBytes, 'n');

class AdmissionTest : public ::testing::Test {
 protected:
  AdmissionTest()
      : founder_(identity::TestIdentity('f')),
        alice_(identity::TestIdentity('a')),
        bob_(identity::TestIdentity('b')),
        mallory_(identity::TestIdentity('m')) {
    policy_.mode = AdmissionMode::kInvite;
    policy_.swarm_name = "swarm";
    policy_.founder_public_key = founder_->public_key();
  }
  proto::SignedInvite Mint(std::optional<common::NodeId> node,
                           absl::Time expires = kNow + absl::Hours(1),
                           const identity::Identity* signer = nullptr) {
    return *MintInvite(signer ? *signer : *founder_, {"swarm", expires, node}, kNonce);
  }
  // The refusal's message, or "OK".
  std::string Refusal(const common::NodeId& id, const proto::SignedInvite& invite,
                      absl::Time now = kNow) {
    absl::Status s = CheckAdmission(policy_, id, invite, now);
    if (s.ok()) return "OK";
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
    return std::string(s.message());
  }

  std::unique_ptr<identity::Identity> founder_, alice_, bob_, mallory_;
  AdmissionPolicy policy_;
};

TEST_F(AdmissionTest, TokenRoundTripsThroughText) {
  const proto::SignedInvite invite = Mint(alice_->id());
  const std::string token = EncodeInvite(invite);
  EXPECT_EQ(token.rfind("ssinv1.", 0), 0u) << token;
  EXPECT_EQ(token.find_first_of(" +/=\n"), std::string::npos) << token;
  absl::StatusOr<proto::SignedInvite> back = DecodeInvite(token);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->SerializeAsString(), invite.SerializeAsString());
  EXPECT_EQ(Refusal(alice_->id(), *back), "OK");
}

TEST_F(AdmissionTest, MalformedTokensAreRefusedNamingTheProblem) {
  EXPECT_NE(DecodeInvite("hello").status().message().find("starts with 'ssinv1.'"),
            std::string::npos);
  EXPECT_FALSE(DecodeInvite("ssinv1.!!!").ok());
  EXPECT_FALSE(DecodeInvite("ssinv1.").ok());
  EXPECT_NE(DecodeInvite(std::string(2000, 'a')).status().message().find("limit"),
            std::string::npos);
  const std::string token = EncodeInvite(Mint(alice_->id()));
  EXPECT_FALSE(DecodeInvite(token.substr(0, token.size() / 2)).ok());
}

TEST_F(AdmissionTest, OpenSwarmAdmitsAnyone) {
  policy_.mode = AdmissionMode::kOpen;
  EXPECT_EQ(Refusal(mallory_->id(), {}), "OK");
}

TEST_F(AdmissionTest, NoInviteIsRefused) {
  EXPECT_NE(Refusal(alice_->id(), {}).find("has no invite"), std::string::npos);
}

TEST_F(AdmissionTest, FounderAndAllowListNeedNoInvite) {
  EXPECT_EQ(Refusal(founder_->id(), {}), "OK");
  policy_.allowed_ids.insert(bob_->id());
  EXPECT_EQ(Refusal(bob_->id(), {}), "OK");
}

TEST_F(AdmissionTest, InviteExpiresAtItsTime) {
  const proto::SignedInvite invite = Mint(alice_->id(), kNow + absl::Minutes(10));
  EXPECT_EQ(Refusal(alice_->id(), invite, kNow + absl::Minutes(10) - absl::Milliseconds(1)),
            "OK");
  const std::string late = Refusal(alice_->id(), invite, kNow + absl::Minutes(10));
  EXPECT_NE(late.find("expired at 2027-01-15T08:10:00Z"), std::string::npos) << late;
}

TEST_F(AdmissionTest, BoundInviteAdmitsOnlyItsNode) {
  const proto::SignedInvite invite = Mint(alice_->id());
  const std::string other = Refusal(bob_->id(), invite);
  EXPECT_NE(other.find("for another node (" + alice_->id().ShortString() + ")"),
            std::string::npos)
      << other;
}

TEST_F(AdmissionTest, UnboundInviteAdmitsAnyKeyHoldingIt) {
  const proto::SignedInvite invite = Mint(std::nullopt);
  EXPECT_EQ(Refusal(alice_->id(), invite), "OK");
  EXPECT_EQ(Refusal(bob_->id(), invite), "OK");
}

TEST_F(AdmissionTest, ForgedInvitesAreRefused) {
  // Signed by a key other than the founder's.
  EXPECT_NE(Refusal(mallory_->id(), Mint(mallory_->id(), kNow + absl::Hours(1), mallory_.get()))
                .find("forged"),
            std::string::npos);
  // The founder's invite for alice, edited to name mallory (or to last longer).
  proto::SignedInvite edited = Mint(alice_->id());
  proto::Invite inner;
  ASSERT_TRUE(inner.ParseFromString(edited.invite()));
  inner.set_node_id(mallory_->id().Bytes());
  edited.set_invite(inner.SerializeAsString());
  EXPECT_NE(Refusal(mallory_->id(), edited).find("forged"), std::string::npos);
  // The founder's signature over the bare invite bytes (no domain prefix),
  // as if lifted from another message the founder signed.
  proto::SignedInvite lifted = Mint(mallory_->id());
  lifted.set_signature(*founder_->Sign(lifted.invite()));
  EXPECT_NE(Refusal(mallory_->id(), lifted).find("forged"), std::string::npos);
}

TEST_F(AdmissionTest, InviteForAnotherSwarmIsRefused) {
  const proto::SignedInvite invite =
      *MintInvite(*founder_, {"other", kNow + absl::Hours(1), alice_->id()}, kNonce);
  EXPECT_NE(Refusal(alice_->id(), invite).find("for swarm 'other'"), std::string::npos);
}

TEST_F(AdmissionTest, AllowListModeIgnoresInvites) {
  policy_.mode = AdmissionMode::kAllowList;
  const std::string refused = Refusal(alice_->id(), Mint(alice_->id()));
  EXPECT_NE(refused.find("allow-list"), std::string::npos) << refused;
  policy_.allowed_ids.insert(alice_->id());
  EXPECT_EQ(Refusal(alice_->id(), {}), "OK");
}

TEST_F(AdmissionTest, ModeNamesParse) {
  EXPECT_EQ(*ParseAdmissionMode(""), AdmissionMode::kOpen);
  for (AdmissionMode m : {AdmissionMode::kOpen, AdmissionMode::kInvite, AdmissionMode::kAllowList}) {
    EXPECT_EQ(*ParseAdmissionMode(AdmissionModeName(m)), m);
  }
  EXPECT_EQ(ParseAdmissionMode("closed").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(AdmissionTest, MintRefusesABadNonce) {
  EXPECT_FALSE(MintInvite(*founder_, {"swarm", kNow, std::nullopt}, "short").ok());
}

TEST_F(AdmissionTest, AdmittedUntilIsTheInvitesExpiryOrForever) {
  const common::NodeId alice = alice_->id();
  EXPECT_EQ(AdmittedUntil(policy_, alice, Mint(alice)), kNow + absl::Hours(1));
  EXPECT_EQ(AdmittedUntil(policy_, alice, proto::SignedInvite()), absl::InfinitePast());
  EXPECT_EQ(AdmittedUntil(policy_, founder_->id(), proto::SignedInvite()), absl::InfiniteFuture());
  policy_.allowed_ids.insert(alice);
  EXPECT_EQ(AdmittedUntil(policy_, alice, Mint(alice)), absl::InfiniteFuture());
  policy_.mode = AdmissionMode::kOpen;
  EXPECT_EQ(AdmittedUntil(policy_, bob_->id(), proto::SignedInvite()), absl::InfiniteFuture());
}

}  // namespace
}  // namespace skipswarm::membership
