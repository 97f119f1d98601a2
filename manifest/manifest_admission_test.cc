#include "manifest/manifest_admission.h"

#include <cstdlib>
#include <fstream>

#include "gtest/gtest.h"
#include "identity/test_identity.h"
#include "proto/version.h"

namespace skipswarm::manifest {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1'800'000'000);
const std::string kNonce(membership::kInviteNonceBytes, 'n');

class ManifestAdmissionTest : public ::testing::Test {
 protected:
  ManifestAdmissionTest()
      : founder_(identity::TestIdentity('f')),
        joiner_(identity::TestIdentity('j')),
        other_(identity::TestIdentity('o')) {}

  // The policy of a manifest signed by founder_ with these flags.
  membership::AdmissionPolicy PolicyFor(absl::string_view mode, absl::string_view ids = "") {
    proto::SwarmManifest m;
    m.set_format(kManifestFormat);
    m.set_protocol_version(proto::kProtocolVersion);
    m.mutable_admission()->set_swarm_name("s");
    EXPECT_TRUE(WriteAdmission(mode, ids, m.mutable_admission()).ok());
    absl::StatusOr<VerifiedManifest> v = VerifyManifest(*SignManifest(m, *founder_));
    EXPECT_TRUE(v.ok()) << v.status();
    return *AdmissionPolicyOf(*v);
  }
  std::string Token(const identity::Identity& signer, const identity::Identity& holder,
                    absl::Time expires = kNow + absl::Hours(1)) {
    return membership::EncodeInvite(
        *membership::MintInvite(signer, {"s", expires, holder.id()}, kNonce));
  }

  std::unique_ptr<identity::Identity> founder_, joiner_, other_;
};

TEST_F(ManifestAdmissionTest, FlagsAreCheckedWhenTheManifestIsWritten) {
  proto::ManifestAdmission a;
  EXPECT_TRUE(WriteAdmission("", "", &a).ok());
  EXPECT_EQ(a.policy(), "open");
  EXPECT_FALSE(WriteAdmission("closed", "", &a).ok());
  EXPECT_NE(WriteAdmission("allowlist", "", &a).message().find("needs --allow_node_ids"),
            std::string::npos);
  EXPECT_NE(WriteAdmission("invite", "abc", &a).message().find("is not a node id"),
            std::string::npos);
  // An open swarm's ids are its trusted hosts under probation: only with it.
  ASSERT_TRUE(WriteAdmission("open", joiner_->id().Hex(), &a).ok());
  EXPECT_NE(WriteNewcomerCosts(0, 0, &a).message().find("--probation_iterations"),
            std::string::npos);
  EXPECT_TRUE(WriteNewcomerCosts(0, 10, &a).ok());
  ASSERT_TRUE(WriteAdmission("allowlist", joiner_->id().Hex() + ", " + other_->id().Hex(), &a).ok());
  EXPECT_EQ(a.allowed_ids_size(), 2);
}

// Note [Join work]: an open swarm's newcomer costs travel in the signed
// manifest, bound to its id; an invite swarm cannot ask for them, and a
// manifest asking for impossible work is refused when read.
TEST_F(ManifestAdmissionTest, NewcomerCostsComeFromTheManifestAndAreBounded) {
  proto::SwarmManifest m;
  m.set_format(kManifestFormat);
  m.set_protocol_version(proto::kProtocolVersion);
  ASSERT_TRUE(WriteAdmission("open", "", m.mutable_admission()).ok());
  ASSERT_TRUE(WriteNewcomerCosts(12, 50, m.mutable_admission()).ok());
  absl::StatusOr<VerifiedManifest> v = VerifyManifest(*SignManifest(m, *founder_));
  ASSERT_TRUE(v.ok()) << v.status();
  absl::StatusOr<membership::AdmissionPolicy> p = AdmissionPolicyOf(*v);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->join_work_bits, 12u);
  EXPECT_EQ(p->probation_iterations, 50u);
  EXPECT_EQ(p->manifest_id, v->sha256);

  proto::ManifestAdmission invite;
  ASSERT_TRUE(WriteAdmission("invite", "", &invite).ok());
  EXPECT_NE(WriteNewcomerCosts(12, 0, &invite).message().find("--admission=open"),
            std::string::npos);
  EXPECT_EQ(WriteNewcomerCosts(33, 0, m.mutable_admission()).code(),
            absl::StatusCode::kInvalidArgument);
  m.mutable_admission()->set_join_work_bits(40);  // a founder's build without the check
  absl::StatusOr<VerifiedManifest> wall = VerifyManifest(*SignManifest(m, *founder_));
  ASSERT_TRUE(wall.ok()) << wall.status();
  EXPECT_EQ(AdmissionPolicyOf(*wall).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ManifestAdmissionTest, PolicyComesFromTheSignedManifest) {
  membership::AdmissionPolicy p = PolicyFor("invite", joiner_->id().Hex());
  EXPECT_EQ(p.mode, membership::AdmissionMode::kInvite);
  EXPECT_EQ(p.swarm_name, "s");
  EXPECT_EQ(p.founder_public_key, founder_->public_key());
  EXPECT_TRUE(p.allowed_ids.contains(joiner_->id()));
}

TEST_F(ManifestAdmissionTest, OpenSwarmAndFounderNeedNoInvite) {
  EXPECT_TRUE(CheckOwnAdmission(PolicyFor("open"), joiner_->id(), "", kNow).ok());
  EXPECT_TRUE(CheckOwnAdmission(PolicyFor("invite"), founder_->id(), "", kNow).ok());
}

TEST_F(ManifestAdmissionTest, JoinerIsToldWhyItWouldBeRefused) {
  const membership::AdmissionPolicy p = PolicyFor("invite");
  auto cause = [&](absl::string_view flag) {
    return std::string(CheckOwnAdmission(p, joiner_->id(), flag, kNow).status().message());
  };
  EXPECT_NE(cause("").find("[admission]"), std::string::npos);
  EXPECT_NE(cause("").find("has no invite"), std::string::npos) << cause("");
  EXPECT_NE(cause(Token(*founder_, *joiner_, kNow - absl::Seconds(1))).find("expired at"),
            std::string::npos);
  EXPECT_NE(cause(Token(*other_, *joiner_)).find("forged"), std::string::npos);
  EXPECT_NE(cause(Token(*founder_, *other_)).find("for another node"), std::string::npos);
  EXPECT_NE(cause("/nonexistent/invite").find("neither an invite token"), std::string::npos);
  EXPECT_NE(cause("ssinv1.@@").find("--invite:"), std::string::npos);
  absl::StatusOr<proto::SignedInvite> ok =
      CheckOwnAdmission(p, joiner_->id(), Token(*founder_, *joiner_), kNow);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_FALSE(ok->invite().empty());
}

TEST_F(ManifestAdmissionTest, InviteMayComeFromAFile) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/invite.txt";
  std::ofstream(path) << Token(*founder_, *joiner_) << "\n";
  absl::StatusOr<proto::SignedInvite> ok =
      CheckOwnAdmission(PolicyFor("invite"), joiner_->id(), path, kNow);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_FALSE(ok->invite().empty());
}

}  // namespace
}  // namespace skipswarm::manifest
