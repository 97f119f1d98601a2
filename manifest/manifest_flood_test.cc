// Note [Manifest joiners]: a Sybil flood of GetManifest calls holds the
// budget all strangers share; an invited joiner still fetches the manifest
// (the joiners' budget), an uninvited caller is refused and retried, and a
// flood of calls carrying proofs stays bounded. Real gRPC on a port the
// kernel picks; the quota runs on a SimClock that never advances, so the
// flood holds the strangers' budget for the whole test.
#include <grpcpp/grpcpp.h>

#include <iostream>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/peer_quota.h"
#include "common/real_clock.h"
#include "common/sim_clock.h"
#include "gtest/gtest.h"
#include "identity/test_identity.h"
#include "manifest/bootstrap.h"
#include "manifest/join_challenge.h"
#include "manifest/manifest_service.h"
#include "membership/admission.h"
#include "membership/join_work.h"
#include "proto/version.h"

namespace skipswarm::manifest {
namespace {

constexpr char kSwarmId[] = "swarm-a";
constexpr int kFloodCalls = 100;

proto::SignedManifest Signed(const identity::Identity& founder) {
  proto::SwarmManifest m;
  m.set_format(kManifestFormat);
  m.set_protocol_version(proto::kProtocolVersion);
  m.mutable_model()->set_num_layers(4);
  return *SignManifest(m, founder);
}

// The budgets of the test: every loopback caller shares one address, so
// the per-address budget is unlimited here, as if each flood call came from
// an address of its own within its own budget; the strangers' shared
// budget and the joiners' are what the flood meets; `joiner` is each
// proof's own (unset: a stranger's, unlimited here).
std::shared_ptr<common::PeerQuota> FloodQuota(common::Clock* clock,
                                              std::optional<common::QuotaBudget> joiner) {
  common::PeerQuotaOptions q;
  q.service = "manifest";
  q.stranger = {};
  q.all_strangers = common::QuotaBudget{/*messages_per_second=*/10, /*message_burst=*/20, 0, 0, 0};
  q.joiners = common::QuotaBudget{/*messages_per_second=*/2, /*message_burst=*/4, 0, 0, 0};
  q.joiner = joiner;
  return std::make_shared<common::PeerQuota>(q, clock);
}

enum class Swarm { kInvite, kOpen, kAllowList, kInviteWithList };

// The secret of the seed's join challenges (fixed: tests are deterministic).
const std::string kChallengeSecret(32, 'k');

// The swarm's admission: an invite swarm (kInviteWithList: `listed` on its
// allow-list too), an open swarm asking 12 bits of work, or an allow-list
// swarm of `listed`.
membership::AdmissionPolicy PolicyOf(const identity::Identity& founder, Swarm swarm,
                                     const common::NodeId& listed) {
  const bool open = swarm == Swarm::kOpen;
  membership::AdmissionPolicy p;
  p.mode = open                          ? membership::AdmissionMode::kOpen
           : swarm == Swarm::kAllowList ? membership::AdmissionMode::kAllowList
                                        : membership::AdmissionMode::kInvite;
  p.swarm_name = "s";
  p.founder_public_key = founder.public_key();
  if (swarm == Swarm::kAllowList || swarm == Swarm::kInviteWithList) p.allowed_ids = {listed};
  if (open) {
    p.join_work_bits = 12;
    p.manifest_id = Sha256Hex(Signed(founder).manifest());
  }
  return p;
}

class ManifestFloodTest : public ::testing::Test {
 protected:
  explicit ManifestFloodTest(Swarm swarm = Swarm::kInvite,
                             std::optional<common::QuotaBudget> joiner = std::nullopt)
      : founder_(identity::TestIdentity('\x01')),
        joiner_(identity::TestIdentity('\x02')),
        quota_(FloodQuota(&quota_clock_, joiner)),
        policy_(PolicyOf(*founder_, swarm, joiner_->id())),
        service_(Signed(*founder_), kSwarmId, quota_, policy_, &quota_clock_,
                 kChallengeSecret) {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    b.RegisterService(&service_);
    server_ = b.BuildAndStart();
  }
  ~ManifestFloodTest() override { server_->Shutdown(); }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }

  // An invite signed by `signer` for node `holder` (null: any one node).
  JoinerProof Proof(const identity::Identity& signer, const identity::Identity* holder,
                    char nonce = 'n') {
    std::optional<common::NodeId> bound;
    if (holder != nullptr) bound = holder->id();
    absl::StatusOr<proto::SignedInvite> invite = membership::MintInvite(
        signer, {"s", absl::UnixEpoch() + absl::Hours(1), bound},
        std::string(membership::kInviteNonceBytes, nonce));
    EXPECT_TRUE(invite.ok()) << invite.status();
    const identity::Identity& who = holder != nullptr ? *holder : *joiner_;
    JoinerProof proof;
    proof.signed_invite = invite->SerializeAsString();
    proof.node_id = who.id().Bytes();
    return proof;
  }

  // kFloodCalls calls without a proof; returns how many were served.
  int Flood(const JoinerProof& proof = {}) {
    int served = 0;
    for (int i = 0; i < kFloodCalls; ++i) {
      served += CallGetManifest(address(), identity::PeerCredentials::Insecure(), kSwarmId,
                                absl::Seconds(20), proof)
                    .ok();
    }
    return served;
  }

  // The joiner's whole fetch, with the daemon's retry policy; with
  // `public_key` it answers an open swarm's ask for join work, with
  // `signer` a seed's challenge.
  absl::StatusOr<VerifiedManifest> Join(const JoinerProof& proof, absl::Duration timeout,
                                        const std::string& public_key = "",
                                        const std::string& pinned_sha256 = "",
                                        uint64_t* join_work = nullptr,
                                        const identity::Identity* signer = nullptr) {
    JoinTargets t;
    t.addresses = {address()};
    t.pinned_sha256 = pinned_sha256;
    BootstrapOptions o;
    o.public_key = public_key;
    o.credentials = identity::PeerCredentials::Insecure();
    o.swarm_id = kSwarmId;
    o.timeout = timeout;
    o.call_timeout = absl::Seconds(5);
    o.proof = proof;
    o.signer = signer;
    return FetchSwarmManifest(t, o, clock_.get(), join_work);
  }

  common::SimClock quota_clock_;
  std::unique_ptr<identity::Identity> founder_, joiner_;
  std::shared_ptr<common::PeerQuota> quota_;
  const membership::AdmissionPolicy policy_;
  ManifestService service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<common::RealClock> clock_ = common::RealClock::Create();
};

TEST_F(ManifestFloodTest, AnInvitedJoinerFetchesTheManifestWhileAFloodHolds) {
  const int served = Flood();
  EXPECT_EQ(served, 20);  // the strangers' burst; the SimClock never refills it
  const uint64_t flood_refused = quota_->total_refusals();
  EXPECT_EQ(flood_refused, static_cast<uint64_t>(kFloodCalls - served));

  const absl::Duration start = clock_->SteadyNow();
  absl::StatusOr<VerifiedManifest> v = Join(Proof(*founder_, joiner_.get()), absl::Seconds(5));
  const absl::Duration took = clock_->SteadyNow() - start;
  const uint64_t joiner_refused = quota_->total_refusals() - flood_refused;
  std::cout << "flood: " << served << " served, " << flood_refused << " refused; joiner: "
            << joiner_refused << " refused, " << quota_->joiners_admitted()
            << " admitted, fetched=" << v.ok() << " in " << took << "\n";
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->founder, founder_->id());
  EXPECT_EQ(joiner_refused, 0u);
  EXPECT_EQ(quota_->joiners_admitted(), 1u);
}

TEST_F(ManifestFloodTest, AnUninvitedCallerIsRefusedAsBusyAndRetries) {
  Flood();
  const uint64_t flood_refused = quota_->total_refusals();
  absl::StatusOr<VerifiedManifest> v = Join({}, absl::Seconds(1));
  const uint64_t attempts = quota_->total_refusals() - flood_refused;
  std::cout << "uninvited joiner: " << attempts << " attempts refused in 1 s\n";
  EXPECT_EQ(v.status().code(), absl::StatusCode::kResourceExhausted) << v.status();
  EXPECT_TRUE(absl::StrContains(v.status().message(), "[busy]")) << v.status();
  EXPECT_GE(attempts, 2u);   // retried
  EXPECT_LE(attempts, 10u);  // with backoff, not in a tight loop
  EXPECT_EQ(quota_->joiners_admitted(), 0u);
  // An invite swarm without an allow-list has no one to challenge.
  SeedAsks asks;
  EXPECT_FALSE(CallGetManifest(address(), identity::PeerCredentials::Insecure(), kSwarmId,
                               absl::Seconds(20), {}, &asks)
                   .ok());
  EXPECT_FALSE(asks.challenge.has_value());
}

// Hostile input: a proof is no free pass. One valid invite, however many
// calls or ids carry it, gets the joiners' burst; forged invites, and a
// public id (the founder's) with a forged invite, get nothing.
TEST_F(ManifestFloodTest, AFloodOfProofsStaysBounded) {
  Flood();
  EXPECT_EQ(Flood(Proof(*founder_, joiner_.get())), 4);  // the joiners' burst
  auto other = identity::TestIdentity('\x03');
  EXPECT_EQ(Flood(Proof(*founder_, other.get(), 'm')), 0);  // the joiners' budget is spent
  const auto refusals = quota_->refusals();
  const auto joiners =
      refusals.find({common::QuotaReason::kJoiners, common::PeerClass::kStranger});
  ASSERT_NE(joiners, refusals.end());
  EXPECT_EQ(joiners->second, 2u * kFloodCalls - 4);

  quota_clock_.Advance(absl::Seconds(10));  // both budgets full again
  Flood();                                  // the strangers' spent again
  const uint64_t admitted = quota_->joiners_admitted();
  auto forger = identity::TestIdentity('\x04');
  int forged = 0;
  for (int i = 0; i < 20; ++i) {
    forged += CallGetManifest(address(), identity::PeerCredentials::Insecure(), kSwarmId,
                              absl::Seconds(20), Proof(*forger, forger.get(), 'a' + i))
                  .ok();
  }
  JoinerProof founders_id = Proof(*forger, nullptr, 'z');
  founders_id.node_id = founder_->id().Bytes();
  forged += CallGetManifest(address(), identity::PeerCredentials::Insecure(), kSwarmId,
                            absl::Seconds(20), founders_id)
                .ok();
  EXPECT_EQ(forged, 0);
  EXPECT_EQ(quota_->joiners_admitted(), admitted);
  // An unbound invite, which any id may carry, gets no more.
  EXPECT_EQ(Flood(Proof(*founder_, nullptr, 'u')), 4);
}

// An open swarm that asks join work (Note [Manifest joiners]): its seed's
// refusal names the work, and the joiner's retry carries it.
class OpenSwarmFloodTest : public ManifestFloodTest {
 protected:
  explicit OpenSwarmFloodTest(std::optional<common::QuotaBudget> joiner = std::nullopt)
      : ManifestFloodTest(Swarm::kOpen, joiner) {}

  // `who`'s join work proof with nonce `nonce`.
  static JoinerProof Work(const identity::Identity& who, uint64_t nonce) {
    JoinerProof p;
    p.public_key = who.public_key();
    p.join_work = nonce;
    return p;
  }
  uint64_t Solved(const identity::Identity& who) const {
    return *membership::SolveJoinWork(policy_.manifest_id, who.public_key(),
                                      policy_.join_work_bits);
  }
  // A nonce giving `who` fewer bits than asked.
  uint64_t Insufficient(const identity::Identity& who) const {
    uint64_t n = 0;
    while (membership::JoinWorkBits(policy_.manifest_id, who.public_key(), n) >=
           static_cast<int>(policy_.join_work_bits)) {
      ++n;
    }
    return n;
  }
};

TEST_F(OpenSwarmFloodTest, AJoinerSolvesTheAskedWorkAndFetchesWhileAFloodHolds) {
  Flood();
  const uint64_t flood_refused = quota_->total_refusals();
  for (const std::string& pin : {std::string(), policy_.manifest_id}) {
    const absl::Duration start = clock_->SteadyNow();
    const uint64_t before = quota_->total_refusals();
    uint64_t work = 0;
    absl::StatusOr<VerifiedManifest> v =
        Join({}, absl::Seconds(5), joiner_->public_key(), pin, &work);
    const uint64_t refused = quota_->total_refusals() - before;
    std::cout << "open-swarm joiner (pinned=" << !pin.empty() << "): " << refused
              << " refused, fetched=" << v.ok() << " in " << clock_->SteadyNow() - start
              << "\n";
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(v->sha256, policy_.manifest_id);
    EXPECT_EQ(refused, 1u);  // the call that learnt the ask; its retry is admitted
    // The work solved is the gossip step's: its record carries it.
    EXPECT_GE(membership::JoinWorkBits(policy_.manifest_id, joiner_->public_key(), work),
              static_cast<int>(policy_.join_work_bits));
  }
  EXPECT_EQ(quota_->joiners_admitted(), 2u);
  EXPECT_GE(flood_refused, 80u);
}

TEST_F(OpenSwarmFloodTest, AJoinerWithoutItsKeyOrAgainstAnotherPinStaysBusy) {
  Flood();
  absl::StatusOr<VerifiedManifest> v = Join({}, absl::Seconds(1));
  EXPECT_TRUE(absl::StrContains(v.status().message(), "[busy]")) << v.status();
  // A seed asking work for another manifest than the swarm file pins.
  v = Join({}, absl::Seconds(1), joiner_->public_key(), std::string(64, 'a'));
  EXPECT_TRUE(absl::StrContains(v.status().message(), "[busy]")) << v.status();
  EXPECT_EQ(quota_->joiners_admitted(), 0u);
}

// Hostile input: insufficient work, another key's nonce and the founder's
// public key (which asks none) are refused; one identity's valid work,
// however many calls carry it, gets the joiners' burst, a second identity
// then nothing; the ask goes only to callers naming this swarm.
TEST_F(OpenSwarmFloodTest, ForgedWorkIsRefusedAndProvenCallsStayBounded) {
  Flood();
  auto other = identity::TestIdentity('\x03');
  SeedAsks asks;
  int forged = 0;
  for (const JoinerProof& p : {Work(*joiner_, Insufficient(*joiner_)),
                               Work(*joiner_, Solved(*other)), Work(*founder_, 0)}) {
    forged += CallGetManifest(address(), identity::PeerCredentials::Insecure(), kSwarmId,
                              absl::Seconds(20), p, &asks)
                  .ok();
    ASSERT_TRUE(asks.work.has_value());
    EXPECT_EQ(asks.work->manifest_id, policy_.manifest_id);
    EXPECT_EQ(asks.work->bits, policy_.join_work_bits);
    EXPECT_FALSE(asks.challenge.has_value());  // an open swarm lists no ids
  }
  EXPECT_EQ(forged, 0);
  EXPECT_EQ(quota_->joiners_admitted(), 0u);
  CallGetManifest(address(), identity::PeerCredentials::Insecure(), "another-swarm",
                  absl::Seconds(20), {}, &asks)
      .IgnoreError();
  EXPECT_FALSE(asks.work.has_value());

  EXPECT_EQ(Flood(Work(*joiner_, Solved(*joiner_))), 4);  // the joiners' burst
  EXPECT_EQ(Flood(Work(*other, Solved(*other))), 0);      // the joiners' budget is spent
  const auto refusals = quota_->refusals();
  const auto joiners =
      refusals.find({common::QuotaReason::kJoiners, common::PeerClass::kStranger});
  ASSERT_NE(joiners, refusals.end());
  EXPECT_EQ(joiners->second, 2u * kFloodCalls - 4);
}

// An allow-list swarm listing joiner_ (Note [Manifest joiners]): its
// seed's refusal gives a challenge, and the joiner's retry signs it.
class AllowListFloodTest : public ManifestFloodTest {
 protected:
  explicit AllowListFloodTest(Swarm swarm = Swarm::kAllowList) : ManifestFloodTest(swarm) {}

  // The challenge a refusal of this swarm's caller gives ("" when none).
  std::string Challenge() {
    SeedAsks asks;
    EXPECT_FALSE(CallGetManifest(address(), identity::PeerCredentials::Insecure(), kSwarmId,
                                 absl::Seconds(20), {}, &asks)
                     .ok());
    return asks.challenge.value_or("");
  }
  // `who`'s proof of its key over `challenge`.
  static JoinerProof KeyProof(const identity::Identity& who, const std::string& challenge) {
    JoinerProof p;
    p.node_id = who.id().Bytes();
    p.public_key = who.public_key();
    p.challenge = challenge;
    p.signature = *SignJoinChallenge(who, kSwarmId, challenge);
    return p;
  }
  // 1 when one call carrying `proof` is served, else 0.
  int Call(const JoinerProof& proof) {
    return CallGetManifest(address(), identity::PeerCredentials::Insecure(), kSwarmId,
                           absl::Seconds(20), proof)
        .ok();
  }
};

TEST_F(AllowListFloodTest, AListedJoinerSignsTheChallengeAndFetchesWhileAFloodHolds) {
  Flood();
  const uint64_t flood_refused = quota_->total_refusals();
  const absl::Duration start = clock_->SteadyNow();
  absl::StatusOr<VerifiedManifest> v =
      Join({}, absl::Seconds(5), "", "", nullptr, joiner_.get());
  const uint64_t refused = quota_->total_refusals() - flood_refused;
  std::cout << "allow-listed joiner: " << refused << " refused, fetched=" << v.ok() << " in "
            << clock_->SteadyNow() - start << "\n";
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->founder, founder_->id());
  EXPECT_EQ(refused, 1u);  // the call that got the challenge; its signed retry is admitted
  EXPECT_EQ(quota_->joiners_admitted(), 1u);
}

TEST_F(AllowListFloodTest, AJoinerThatCannotSignStaysBusy) {
  Flood();
  const uint64_t flood_refused = quota_->total_refusals();
  absl::StatusOr<VerifiedManifest> v = Join({}, absl::Seconds(1));
  std::cout << "allow-listed joiner without its key: " << quota_->total_refusals() - flood_refused
            << " refused in 1 s\n";
  EXPECT_TRUE(absl::StrContains(v.status().message(), "[busy]")) << v.status();
  EXPECT_EQ(quota_->joiners_admitted(), 0u);
}

// Hostile input: forged and other ids' signatures, an unlisted id, another
// seed's challenge and a stale one are refused; the challenge goes only to
// callers naming this swarm.
TEST_F(AllowListFloodTest, ForgedStaleAndForeignProofsAreRefused) {
  Flood();
  const std::string challenge = Challenge();
  ASSERT_FALSE(challenge.empty());
  auto unlisted = identity::TestIdentity('\x03');
  JoinerProof forged = KeyProof(*joiner_, challenge);
  forged.signature[0] ^= 1;
  JoinerProof others_signature = KeyProof(*unlisted, challenge);
  others_signature.node_id = joiner_->id().Bytes();  // the key is not the id's
  JoinerProof others_over_listed = KeyProof(*joiner_, challenge);
  others_over_listed.signature = KeyProof(*unlisted, challenge).signature;
  const std::string foreign =
      JoinChallenges(std::string(32, 'o')).Issue(kSwarmId, quota_clock_.SteadyNow());
  int served = 0;
  for (const JoinerProof& p : {forged, others_signature, others_over_listed,
                               KeyProof(*unlisted, challenge), KeyProof(*joiner_, foreign)}) {
    served += Call(p);
  }
  EXPECT_EQ(served, 0);
  EXPECT_EQ(quota_->joiners_admitted(), 0u);
  SeedAsks asks;
  CallGetManifest(address(), identity::PeerCredentials::Insecure(), "another-swarm",
                  absl::Seconds(20), {}, &asks)
      .IgnoreError();
  EXPECT_FALSE(asks.challenge.has_value());

  const JoinerProof valid = KeyProof(*joiner_, challenge);
  EXPECT_EQ(Call(valid), 1);
  quota_clock_.Advance(2 * kJoinChallengeBucket + absl::Seconds(1));
  Flood();  // the strangers' budget refilled: spent again
  EXPECT_EQ(Call(valid), 0);  // stale
  EXPECT_EQ(quota_->joiners_admitted(), 1u);
  EXPECT_EQ(Call(KeyProof(*joiner_, Challenge())), 1);  // a fresh one is taken
}

TEST_F(AllowListFloodTest, OneValidProofReplayedIsBoundedByTheJoinersBurst) {
  Flood();
  const std::string challenge = Challenge();
  ASSERT_FALSE(challenge.empty());
  EXPECT_EQ(Flood(KeyProof(*joiner_, challenge)), 4);  // the joiners' burst
  EXPECT_EQ(quota_->joiners_admitted(), 4u);
}

// An invite swarm with an allow-list: its listed id proves its key; an
// invited id that signed a challenge too keeps its invite's proof.
class InviteListFloodTest : public AllowListFloodTest {
 protected:
  InviteListFloodTest() : AllowListFloodTest(Swarm::kInviteWithList) {}
};

TEST_F(InviteListFloodTest, AListedJoinerSignsAndAnInvitedOneKeepsItsInvite) {
  Flood();
  const uint64_t flood_refused = quota_->total_refusals();
  absl::StatusOr<VerifiedManifest> v =
      Join({}, absl::Seconds(5), "", "", nullptr, joiner_.get());
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(quota_->total_refusals() - flood_refused, 1u);
  auto invited = identity::TestIdentity('\x03');
  JoinerProof both = KeyProof(*invited, Challenge());
  both.signed_invite = Proof(*founder_, invited.get(), 'i').signed_invite;
  EXPECT_EQ(Call(both), 1);
  EXPECT_EQ(quota_->joiners_admitted(), 2u);
}

// Note [Joiners' budget]: with each proof's own joiner budget (a call a
// second, burst 3, as the daemon's), a flooder holding one valid work
// identity and calling continuously gets its own burst, not the joiners'
// whole budget, and an honest joiner with its own work still fetches.
class OneProofFloodTest : public OpenSwarmFloodTest {
 protected:
  OneProofFloodTest() : OpenSwarmFloodTest(common::QuotaBudget{1, 3, 0, 0, 0}) {}
};

TEST_F(OneProofFloodTest, AnHonestJoinerFetchesWhileOneProvenIdentityFloods) {
  Flood();
  auto flooder = identity::TestIdentity('\x03');
  const int flooder_served = Flood(Work(*flooder, Solved(*flooder)));
  const uint64_t before = quota_->total_refusals();
  absl::StatusOr<VerifiedManifest> v = Join({}, absl::Seconds(5), joiner_->public_key());
  std::cout << "one proven flooder: " << flooder_served << " of " << kFloodCalls
            << " served; honest joiner: " << quota_->total_refusals() - before
            << " refused, fetched=" << v.ok() << "\n";
  EXPECT_EQ(flooder_served, 3);  // its own burst
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(quota_->joiners_admitted(), 4u);
}

TEST(JoinWorkAskTest, ParsesOnlyAWellFormedAsk) {
  const std::string id(64, 'f');
  ASSERT_TRUE(ParseJoinWorkAsk(id + "/12").has_value());
  EXPECT_EQ(ParseJoinWorkAsk(id + "/12")->bits, 12u);
  for (const std::string& bad :
       {id + "/0", id + "/33", id + "/x", id + "12", id.substr(1) + "/12", std::string(64, 'F') +
        "/12", id + "/", id + "/123", std::string()}) {
    EXPECT_FALSE(ParseJoinWorkAsk(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace skipswarm::manifest
