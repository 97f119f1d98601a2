#include "membership/join_work.h"

#include <string>

#include "gtest/gtest.h"

namespace skipswarm::membership {
namespace {

const std::string kKey(32, 'k');
const std::string kOtherKey(32, 'o');
const std::string kManifest = std::string(64, 'a');

AdmissionPolicy OpenWith(uint32_t bits) {
  AdmissionPolicy p;
  p.join_work_bits = bits;
  p.manifest_id = kManifest;
  p.founder_public_key = std::string(32, 'f');
  return p;
}

TEST(JoinWorkTest, ASolvedNonceMeetsItsBitsAndIsBoundToKeyAndManifest) {
  absl::StatusOr<uint64_t> nonce = SolveJoinWork(kManifest, kKey, 12);
  ASSERT_TRUE(nonce.ok()) << nonce.status();
  EXPECT_GE(JoinWorkBits(kManifest, kKey, *nonce), 12);
  const common::NodeId id = common::NodeId::FromPublicKey(kKey);
  EXPECT_TRUE(CheckJoinWork(OpenWith(12), id, kKey, *nonce).ok());
  // Work for one key or manifest buys nothing for another (2^-12 odds of a
  // chance hit: the fixed inputs here do not hit).
  const common::NodeId other = common::NodeId::FromPublicKey(kOtherKey);
  EXPECT_EQ(CheckJoinWork(OpenWith(12), other, kOtherKey, *nonce).code(),
            absl::StatusCode::kPermissionDenied);
  AdmissionPolicy reissued = OpenWith(12);
  reissued.manifest_id = std::string(64, 'b');
  EXPECT_EQ(CheckJoinWork(reissued, id, kKey, *nonce).code(),
            absl::StatusCode::kPermissionDenied);
}

TEST(JoinWorkTest, NoWorkIsRefusedNamingTheRequirement) {
  const common::NodeId id = common::NodeId::FromPublicKey(kKey);
  // Nonce 0 is not a 20-bit solution for these inputs (checked below).
  ASSERT_LT(JoinWorkBits(kManifest, kKey, 0), 20);
  absl::Status s = CheckJoinWork(OpenWith(20), id, kKey, 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(s.message().find("join work"), std::string::npos) << s;
  EXPECT_NE(s.message().find("20 leading zero bits"), std::string::npos) << s;
}

TEST(JoinWorkTest, FounderInviteSwarmsAndZeroBitsAskNone) {
  const std::string founder_key(32, 'f');
  EXPECT_TRUE(CheckJoinWork(OpenWith(20), common::NodeId::FromPublicKey(founder_key),
                            founder_key, 0)
                  .ok());
  const common::NodeId id = common::NodeId::FromPublicKey(kKey);
  EXPECT_TRUE(CheckJoinWork(OpenWith(0), id, kKey, 0).ok());
  AdmissionPolicy invite = OpenWith(20);
  invite.mode = AdmissionMode::kInvite;
  EXPECT_FALSE(NeedsJoinWork(invite, id));
  EXPECT_TRUE(NeedsJoinWork(OpenWith(20), id));
}

TEST(JoinWorkTest, SolverBoundsAreErrors) {
  EXPECT_EQ(SolveJoinWork(kManifest, kKey, kMaxJoinWorkBits + 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SolveJoinWork(kManifest, kKey, 32, 0, 16).status().code(),
            absl::StatusCode::kResourceExhausted);
  // Zero bits: the first nonce does.
  EXPECT_EQ(*SolveJoinWork(kManifest, kKey, 0, 7), 7u);
}

}  // namespace
}  // namespace skipswarm::membership
