#include "membership/record.h"

#include <string>

#include "gtest/gtest.h"
#include "identity/test_identity.h"
#include "membership/join_work.h"

namespace skipswarm::membership {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1'800'000'000);

class RecordTest : public ::testing::Test {
 protected:
  RecordTest()
      : alice_(identity::TestIdentity('a')),
        mallory_(identity::TestIdentity('m')) {
    policy_.swarm_id = "swarm-1";
    record_.set_swarm_id("swarm-1");
    record_.add_addresses("10.0.0.1:7000");
    record_.add_stages(2);
    record_.set_memory_slots(4);
    record_.set_seconds_per_layer_per_sample(0.01);
    record_.set_incarnation(5);
  }
  proto::SignedNodeRecord Sign(const proto::NodeRecord& r,
                               absl::Time at = kNow) {
    return *SignRecord(*alice_, r, at);
  }

  std::unique_ptr<identity::Identity> alice_, mallory_;
  RecordPolicy policy_;
  proto::NodeRecord record_;
};

TEST_F(RecordTest, ValidRecordVerifies) {
  auto got = VerifyRecord(Sign(record_), policy_, kNow);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->node_id(), alice_->id().Bytes());
  EXPECT_EQ(got->stages(0), 2u);
  EXPECT_EQ(OwnerState(*got), proto::MEMBER_STATE_ALIVE);
}

TEST_F(RecordTest, TamperedRecordIsRejectedAsForged) {
  auto s = Sign(record_);
  proto::NodeRecord r;
  r.ParseFromString(s.record());
  r.set_memory_slots(400);  // changed after signing
  r.SerializeToString(s.mutable_record());
  EXPECT_EQ(VerifyRecord(s, policy_, kNow).status().code(),
            absl::StatusCode::kUnauthenticated);
}

TEST_F(RecordTest, BadSignatureIsRejected) {
  auto s = Sign(record_);
  (*s.mutable_signature())[3] ^= 1;
  EXPECT_EQ(VerifyRecord(s, policy_, kNow).status().code(),
            absl::StatusCode::kUnauthenticated);
  s.set_signature("short");
  EXPECT_FALSE(VerifyRecord(s, policy_, kNow).ok());
}

TEST_F(RecordTest, IdThatIsNotTheKeyHashIsRejected) {
  // Mallory signs a record with her own key but claims Alice's id.
  auto s = *SignRecord(*mallory_, record_, kNow);
  proto::NodeRecord r;
  r.ParseFromString(s.record());
  r.set_node_id(alice_->id().Bytes());
  r.SerializeToString(s.mutable_record());
  s.set_signature(*mallory_->Sign(s.record()));
  auto status = VerifyRecord(s, policy_, kNow).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(status.message().find("not the hash of its key"), std::string::npos);
}

TEST_F(RecordTest, OtherSwarmIsRejected) {
  record_.set_swarm_id("swarm-2");
  EXPECT_EQ(VerifyRecord(Sign(record_), policy_, kNow).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(RecordTest, AllowListIsEnforced) {
  policy_.admission.mode = AdmissionMode::kAllowList;
  policy_.admission.founder_public_key = mallory_->public_key();
  EXPECT_EQ(VerifyRecord(Sign(record_), policy_, kNow).status().code(),
            absl::StatusCode::kPermissionDenied);
  policy_.admission.allowed_ids.insert(alice_->id());
  EXPECT_TRUE(VerifyRecord(Sign(record_), policy_, kNow).ok());
}

// Note [Admission]: under `invite` the record must carry the founder's
// invite; the refusal names the cause.
TEST_F(RecordTest, InviteSwarmAdmitsOnlyRecordsCarryingAValidInvite) {
  policy_.admission.mode = AdmissionMode::kInvite;
  policy_.admission.swarm_name = "swarm";
  policy_.admission.founder_public_key = mallory_->public_key();  // mallory founded it
  auto none = VerifyRecord(Sign(record_), policy_, kNow);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(none.status().message().find("has no invite"), std::string::npos) << none.status();
  *record_.mutable_invite() =
      *MintInvite(*mallory_, {"swarm", kNow + absl::Hours(1), alice_->id()},
                  std::string(kInviteNonceBytes, 'n'));
  EXPECT_TRUE(VerifyRecord(Sign(record_), policy_, kNow).ok());
  auto expired = VerifyRecord(Sign(record_), policy_, kNow + absl::Hours(2));
  EXPECT_NE(expired.status().message().find("expired"), std::string::npos) << expired.status();
}

// Note [Join work]: an open swarm that asks for work refuses a record
// without it (before the signature is checked: a forged record without work
// gets the same answer), and admits one whose nonce meets it.
TEST_F(RecordTest, OpenSwarmRefusesARecordWithoutValidJoinWork) {
  policy_.admission.join_work_bits = 10;
  policy_.admission.manifest_id = std::string(64, 'c');
  policy_.admission.founder_public_key = mallory_->public_key();
  ASSERT_LT(JoinWorkBits(policy_.admission.manifest_id, alice_->public_key(), 0), 10);
  auto none = VerifyRecord(Sign(record_), policy_, kNow);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(none.status().message().find("no valid join work"), std::string::npos)
      << none.status();
  auto forged = Sign(record_);
  (*forged.mutable_signature())[0] ^= 1;
  EXPECT_EQ(VerifyRecord(forged, policy_, kNow).status().code(),
            absl::StatusCode::kPermissionDenied);
  record_.set_join_work(
      *SolveJoinWork(policy_.admission.manifest_id, alice_->public_key(), 10));
  auto solved = VerifyRecord(Sign(record_), policy_, kNow);
  EXPECT_TRUE(solved.ok()) << solved.status();
  // The founder's own record needs none.
  auto founder = VerifyRecord(*SignRecord(*mallory_, proto::NodeRecord(record_), kNow),
                              policy_, kNow);
  EXPECT_TRUE(founder.ok()) << founder.status();
}

TEST_F(RecordTest, FutureAndStaleRecordsAreRejected) {
  EXPECT_FALSE(
      VerifyRecord(Sign(record_, kNow + absl::Minutes(6)), policy_, kNow).ok());
  EXPECT_TRUE(
      VerifyRecord(Sign(record_, kNow + absl::Minutes(4)), policy_, kNow).ok());
  auto stale = VerifyRecord(Sign(record_, kNow - absl::Hours(25)), policy_, kNow);
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(stale.status().message().find("stale"), std::string::npos);
}

TEST_F(RecordTest, OutOfRangeFieldsAreRejected) {
  auto bad = record_;
  for (int i = 0; i < 9; ++i) bad.add_addresses("h:1");
  EXPECT_FALSE(VerifyRecord(Sign(bad), policy_, kNow).ok());
  bad = record_;
  bad.set_seconds_per_layer_per_sample(-1);
  EXPECT_FALSE(VerifyRecord(Sign(bad), policy_, kNow).ok());
  bad = record_;
  bad.set_state(proto::MEMBER_STATE_DEAD);
  EXPECT_FALSE(VerifyRecord(Sign(bad), policy_, kNow).ok());
  proto::SignedNodeRecord junk;
  junk.set_record("\xff\xff garbage");
  EXPECT_FALSE(VerifyRecord(junk, policy_, kNow).ok());
}

TEST(SwarmIdTest, SecretMakesAPrivateSwarmId) {
  EXPECT_EQ(DeriveSwarmId("public", ""), "public");
  const std::string a = DeriveSwarmId("lab", "s3cret");
  EXPECT_EQ(a, DeriveSwarmId("lab", "s3cret"));
  EXPECT_NE(a, DeriveSwarmId("lab", "guess"));
  EXPECT_NE(DeriveSwarmId("ab", "c"), DeriveSwarmId("a", "bc"));
  EXPECT_EQ(a.find("s3cret"), std::string::npos);
  EXPECT_EQ(a.rfind("lab/", 0), 0u);
}

TEST_F(RecordTest, ReplayedOrDuplicateIncarnationIsNotNewer) {
  auto r = *VerifyRecord(Sign(record_), policy_, kNow);
  EXPECT_TRUE(CheckNewer(4, r).ok());
  EXPECT_EQ(CheckNewer(5, r).code(), absl::StatusCode::kAlreadyExists);
  auto replay = CheckNewer(6, r);
  EXPECT_EQ(replay.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(replay.message().find("replayed"), std::string::npos);
}

TEST_F(RecordTest, IncarnationAboveTheCeilingIsRejected) {
  record_.set_incarnation(kMaxIncarnation);
  EXPECT_TRUE(VerifyRecord(Sign(record_), policy_, kNow).ok());
  record_.set_incarnation(kMaxIncarnation + 1);
  EXPECT_EQ(VerifyRecord(Sign(record_), policy_, kNow).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(RecordTest, OpinionVerifiesOnlyWithItsReportersKeyAndSwarm) {
  proto::MembershipUpdate u;
  u.set_node_id(mallory_->id().Bytes());
  u.set_state(proto::MEMBER_STATE_SUSPECT);
  u.set_incarnation(7);
  ASSERT_TRUE(SignOpinion(*alice_, "swarm-1", &u).ok());
  EXPECT_EQ(u.reporter(), alice_->id().Bytes());
  EXPECT_TRUE(VerifyOpinion(u, "swarm-1", alice_->public_key()).ok());
  EXPECT_FALSE(VerifyOpinion(u, "swarm-2", alice_->public_key()).ok());
  EXPECT_FALSE(VerifyOpinion(u, "swarm-1", mallory_->public_key()).ok());
  proto::MembershipUpdate changed = u;
  changed.set_incarnation(8);
  EXPECT_FALSE(VerifyOpinion(changed, "swarm-1", alice_->public_key()).ok());
  changed = u;
  changed.clear_signature();
  EXPECT_FALSE(VerifyOpinion(changed, "swarm-1", alice_->public_key()).ok());
}

TEST_F(RecordTest, RecordOfAnotherModelOrOutsideItIsRejected) {
  policy_.model_id = "model-a";
  policy_.num_stages = 3;
  record_.set_model_id("model-b");
  auto other = VerifyRecord(Sign(record_), policy_, kNow);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(other.status().message().find("another model"), std::string::npos);
  record_.set_model_id("model-a");
  EXPECT_TRUE(VerifyRecord(Sign(record_), policy_, kNow).ok());
  proto::NodeRecord outside = record_;
  outside.add_stages(9);  // --stages=10 --host_stages=9 in a 3-stage swarm
  EXPECT_EQ(VerifyRecord(Sign(outside), policy_, kNow).status().code(),
            absl::StatusCode::kInvalidArgument);
  outside = record_;
  (*outside.mutable_stage_digests())[7] = 1;
  EXPECT_FALSE(VerifyRecord(Sign(outside), policy_, kNow).ok());
}

// A member that averages otherwise (H, codec, overlap) is refused like one
// of another model, naming both settings.
TEST_F(RecordTest, RecordThatAveragesOtherwiseIsRejected) {
  policy_.averaging_id = "H=32 int8";
  record_.set_averaging_id("H=32 int8 overlap");
  auto other = VerifyRecord(Sign(record_), policy_, kNow);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(other.status().message().find("averages its replicas otherwise (averaging 'H=32 "
                                          "int8 overlap', this swarm's 'H=32 int8')"),
            std::string::npos)
      << other.status();
  record_.set_averaging_id("H=32 int8");
  EXPECT_TRUE(VerifyRecord(Sign(record_), policy_, kNow).ok());
}

// Note [Checkable evidence], "Signed swarms": where the manifest says every
// member signs, a record that says it does not is refused like one of
// another model; elsewhere either kind is a member.
TEST_F(RecordTest, RecordThatDoesNotSignIsRejectedInASignedSwarm) {
  record_.set_sign_frames(false);
  EXPECT_TRUE(VerifyRecord(Sign(record_), policy_, kNow).ok());
  policy_.sign_frames = true;
  auto unsigned_member = VerifyRecord(Sign(record_), policy_, kNow);
  EXPECT_EQ(unsigned_member.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(unsigned_member.status().message().find("does not sign its forward frames"),
            std::string::npos)
      << unsigned_member.status();
  record_.set_sign_frames(true);
  EXPECT_TRUE(VerifyRecord(Sign(record_), policy_, kNow).ok());
}

TEST_F(RecordTest, FieldsOutOfRangeAreRejected) {
  proto::NodeRecord r = record_;
  r.set_memory_slots(kMaxRecordMemorySlots + 1);
  EXPECT_FALSE(VerifyRecord(Sign(r), policy_, kNow).ok());
  r = record_;
  r.set_seconds_per_layer_per_sample(1e9);
  EXPECT_FALSE(VerifyRecord(Sign(r), policy_, kNow).ok());
  r = record_;
  r.add_addresses(std::string(kMaxAddressBytes + 1, 'x'));
  EXPECT_FALSE(VerifyRecord(Sign(r), policy_, kNow).ok());
  r = record_;
  r.add_addresses("");
  EXPECT_FALSE(VerifyRecord(Sign(r), policy_, kNow).ok());
}

// Note [Gossiped bans]: a record names at most kMaxRecordBans well-formed ids.
TEST_F(RecordTest, BanListsAreBoundedAndWellFormed) {
  proto::NodeRecord r = record_;
  for (int i = 0; i < kMaxRecordBans; ++i) {
    r.add_bans(common::NodeId::ForName("banned" + std::to_string(i)).Bytes());
  }
  EXPECT_TRUE(VerifyRecord(Sign(r), policy_, kNow).ok());
  r.add_bans(common::NodeId::ForName("one too many").Bytes());
  absl::StatusOr<proto::NodeRecord> over = VerifyRecord(Sign(r), policy_, kNow);
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.status().message().find("malformed ban list"), std::string::npos) << over.status();
  r = record_;
  r.add_bans("short");
  EXPECT_FALSE(VerifyRecord(Sign(r), policy_, kNow).ok());
}

}  // namespace
}  // namespace skipswarm::membership
