#include "manifest/revocation_maker.h"

#include <fstream>

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"
#include "identity/identity.h"
#include "identity/test_identity.h"
#include "membership/admission.h"
#include "membership/revocation.h"

namespace skipswarm::manifest {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1'800'000'000);

class RevocationMakerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir();
    founder_ = identity::TestIdentity('f');
    ASSERT_TRUE(founder_->Save(dir_ + "/founder.key", true).ok());
    other_ = identity::TestIdentity('o');
    ASSERT_TRUE(other_->Save(dir_ + "/other.key", true).ok());
    list_ = dir_ + "/revoked-" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::remove(list_.c_str());
    policy_.swarm_name = "swarm";
    policy_.founder_public_key = founder_->public_key();
  }
  RevokeRequest Request(std::vector<std::string> entries, const std::string& key = "founder") {
    return {dir_ + "/" + key + ".key", "swarm", list_, std::move(entries)};
  }

  std::string dir_, list_;
  std::unique_ptr<identity::Identity> founder_, other_;
  membership::AdmissionPolicy policy_;
};

TEST_F(RevocationMakerTest, ExtendsTheListAndRaisesItsSerial) {
  const std::string bad = other_->id().Hex();
  proto::SignedInvite invite = *membership::MintInvite(
      *founder_, {"swarm", kNow + absl::Hours(1), std::nullopt}, std::string(16, 'i'));
  absl::StatusOr<RevokeResult> first = Revoke(Request({bad}), kNow);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->serial, 1u);
  EXPECT_EQ(first->added, 1);
  // The token, the same node again, and an invite id in hex.
  absl::StatusOr<RevokeResult> second = Revoke(
      Request({membership::EncodeInvite(invite), bad, absl::BytesToHexString(std::string(16, 'j'))}),
      kNow + absl::Minutes(1));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->serial, 2u);
  EXPECT_EQ(second->added, 2);
  EXPECT_EQ(second->total, 3);
  absl::StatusOr<proto::SignedRevocationList> read = ReadRevocationsFile(list_);
  ASSERT_TRUE(read.ok()) << read.status();
  absl::StatusOr<membership::RevocationSet> set = membership::VerifyRevocations(*read, policy_);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->serial, 2u);
  EXPECT_TRUE(set->Revokes(other_->id(), proto::SignedInvite()));
  EXPECT_TRUE(set->Revokes(founder_->id(), invite));  // the invite, whoever holds it
}

TEST_F(RevocationMakerTest, RefusesWhatIsNotAnEntryOrNotThisFoundersList) {
  for (const char* bad : {"xyz", "abcd", "ssinv1.AAAA", ""}) {
    absl::StatusOr<RevokeResult> r = Revoke(Request({bad}), kNow);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(Revoke(Request({}), kNow).ok());
  EXPECT_FALSE(Revoke(Request({founder_->id().Hex()}), kNow).ok());  // itself
  ASSERT_TRUE(Revoke(Request({other_->id().Hex()}), kNow).ok());
  // Another key may not extend the founder's list.
  absl::StatusOr<RevokeResult> stolen = Revoke(Request({founder_->id().Hex()}, "other"), kNow);
  EXPECT_EQ(stolen.status().code(), absl::StatusCode::kInvalidArgument) << stolen.status();
  EXPECT_NE(stolen.status().message().find("not this founder's list"), std::string::npos);
  std::ofstream(list_, std::ios::trunc) << "garbage";
  EXPECT_FALSE(Revoke(Request({other_->id().Hex()}), kNow).ok());
  EXPECT_FALSE(ReadRevocationsFile(dir_ + "/missing").ok());
}

}  // namespace
}  // namespace skipswarm::manifest
