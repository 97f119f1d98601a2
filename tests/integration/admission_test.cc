// Note [Admission] (membership/admission.h) on the simulated network: in a
// swarm whose founder admits by invitation, an invited node joins every
// view, while a node without an invite, with an expired, forged or someone
// else's invite, or replaying an admitted member's record cannot join, is
// told why, learns no member table and never enters a view.
#include <cstdio>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "membership/admission.h"
#include "membership/membership.h"
#include "membership/revocation.h"
#include "proto/version.h"
#include "sim/sim_swarm.h"
#include "tests/integration/unit_membership_options.h"

namespace skipswarm::membership {
namespace {

using sim::SimNetwork;
using sim::SimSwarm;

constexpr uint64_t kSeed = 7;
const std::string kNonce(kInviteNonceBytes, 'n');

enum Node { kFounder, kInvited, kUninvited, kExpired, kForged, kStolen, kShortLease, kNodes };

// kShortLease's invite expires this long after the swarm's clock starts (off the
// 300 ms probe grid, so the eviction figure is not a coincidence of ticks).
constexpr absl::Duration kLease = absl::Milliseconds(30150);

class AdmissionSwarmTest : public ::testing::Test {
 protected:
  AdmissionSwarmTest() {
    MembershipOptions o = UnitMembershipOptions();
    // Same seed, same keys: the probe swarm tells the ids before the
    // swarm's policy is fixed.
    SimSwarm probe(kSeed, SimNetwork::Options(), o);
    for (int i = 0; i < kNodes; ++i) probe.AddNode();
    const identity::Identity& founder = probe.identity(kFounder);
    o.policy.admission.mode = AdmissionMode::kInvite;
    o.policy.admission.swarm_name = "unit";
    o.policy.admission.founder_public_key = founder.public_key();
    swarm_ = std::make_unique<SimSwarm>(kSeed, SimNetwork::Options(), o);
    const absl::Time now = swarm_->clock().Now();
    auto mint = [&](const identity::Identity& signer, int node, absl::Time expires) {
      return *MintInvite(signer, {"unit", expires, probe.id(node)}, kNonce);
    };
    swarm_->AddNode({0});
    swarm_->AddNode({1}, mint(founder, kInvited, now + absl::Hours(1)));
    swarm_->AddNode({1});
    swarm_->AddNode({1}, mint(founder, kExpired, now - absl::Seconds(1)));
    swarm_->AddNode({1}, mint(probe.identity(kForged), kForged, now + absl::Hours(1)));
    swarm_->AddNode({1}, mint(founder, kInvited, now + absl::Hours(1)));  // kInvited's
    lease_end_ = now + kLease;
    swarm_->AddNode({1}, mint(founder, kShortLease, lease_end_));
    for (int i = 0; i < kNodes; ++i) EXPECT_EQ(swarm_->id(i), probe.id(i));
  }

  // Starts node i, joins it through `through` and returns the join's result.
  absl::Status Join(int i, int through) {
    absl::Status result = absl::UnknownError("pending");
    swarm_->node(i).Start();
    swarm_->node(i).Join({swarm_->address(through)}, [&](absl::Status s) { result = s; });
    swarm_->RunUntil([&] { return result.code() != absl::StatusCode::kUnknown; },
                     absl::Seconds(30));
    return result;
  }

  bool InViewOf(int observer, int subject) {
    const MemberInfo* m = swarm_->node(observer).GetView().Find(swarm_->id(subject));
    return m != nullptr && m->state == proto::MEMBER_STATE_ALIVE;
  }

  std::unique_ptr<SimSwarm> swarm_;
  absl::Time lease_end_;
};

TEST_F(AdmissionSwarmTest, InvitedNodeJoinsAndEveryStrangerIsRefusedWithItsCause) {
  ASSERT_TRUE(Join(kFounder, kFounder).ok());  // (itself: skipped, a new swarm)
  ASSERT_TRUE(Join(kInvited, kFounder).ok());
  ASSERT_NE(swarm_->RunUntil([&] { return InViewOf(kFounder, kInvited) &&
                                          InViewOf(kInvited, kFounder); },
                             absl::Seconds(10)),
            absl::InfiniteDuration());

  const struct {
    int node;
    const char* cause;
  } strangers[] = {
      {kUninvited, "has no invite"},
      {kExpired, "invite expired at"},
      {kForged, "invite is forged"},
      {kStolen, "invite is for another node"},
  };
  for (const auto& s : strangers) {
    for (int through : {kFounder, kInvited}) {
      absl::Status joined = Join(s.node, through);
      EXPECT_EQ(joined.code(), absl::StatusCode::kPermissionDenied) << s.cause << ": " << joined;
      EXPECT_NE(joined.message().find(s.cause), std::string::npos) << joined;
      swarm_->node(s.node).Stop();
    }
  }
  swarm_->Run(absl::Seconds(20));  // gossip rounds: nothing leaks second-hand
  for (const auto& s : strangers) {
    for (int member : {kFounder, kInvited}) {
      EXPECT_FALSE(InViewOf(member, s.node)) << s.cause;
      EXPECT_EQ(swarm_->node(member).GetView().Find(swarm_->id(s.node)), nullptr) << s.cause;
    }
    // Nothing came back to it: no member table.
    EXPECT_EQ(swarm_->node(s.node).GetView().Find(swarm_->id(kFounder)), nullptr) << s.cause;
    EXPECT_EQ(swarm_->node(s.node).GetView().Find(swarm_->id(kInvited)), nullptr) << s.cause;
  }
  EXPECT_TRUE(InViewOf(kFounder, kInvited));
  EXPECT_TRUE(InViewOf(kInvited, kFounder));
  EXPECT_GE(swarm_->node(kFounder).stats().admission_refused, 4u);
  EXPECT_GE(swarm_->node(kInvited).stats().admission_refused, 4u);
}

// Note [Eviction]: an invite is a lease. Members evict a running member
// whose invite expires (by the simulated clock), within a probe tick, and
// its own pings, carrying its record, bring it back nowhere.
TEST_F(AdmissionSwarmTest, AnExpiredInviteEvictsARunningMember) {
  ASSERT_TRUE(Join(kFounder, kFounder).ok());
  ASSERT_TRUE(Join(kInvited, kFounder).ok());
  ASSERT_TRUE(Join(kShortLease, kInvited).ok());
  ASSERT_NE(swarm_->RunUntil([&] { return InViewOf(kFounder, kShortLease) &&
                                          InViewOf(kInvited, kShortLease) &&
                                          InViewOf(kFounder, kInvited); },
                             absl::Seconds(10)),
            absl::InfiniteDuration());
  swarm_->Run(lease_end_ - swarm_->clock().Now() - absl::Milliseconds(1));
  EXPECT_TRUE(InViewOf(kFounder, kShortLease));  // admitted up to its expiry
  EXPECT_TRUE(InViewOf(kInvited, kShortLease));
  const uint64_t refused_before = swarm_->node(kFounder).stats().admission_refused;

  const absl::Duration took = swarm_->RunUntil(
      [&] {
        return swarm_->node(kFounder).GetView().Find(swarm_->id(kShortLease)) == nullptr &&
               swarm_->node(kInvited).GetView().Find(swarm_->id(kShortLease)) == nullptr;
      },
      absl::Seconds(5), absl::Milliseconds(1));
  ASSERT_NE(took, absl::InfiniteDuration());
  // Each member evicts at its next probe tick (probe interval 300 ms, longer
  // while its health score is up).
  EXPECT_LE(took, absl::Seconds(3)) << took;
  std::printf("FIGURE expired_invite_evicted_everywhere_after_ms=%lld\n",
              static_cast<long long>(absl::ToInt64Milliseconds(took)));
  swarm_->Run(absl::Seconds(30));  // its pings and push-pulls keep coming
  for (int member : {kFounder, kInvited}) {
    EXPECT_EQ(swarm_->node(member).GetView().Find(swarm_->id(kShortLease)), nullptr);
    EXPECT_EQ(swarm_->node(member).stats().evicted, 1u);
    EXPECT_TRUE(InViewOf(member, member == kFounder ? kInvited : kFounder));
  }
  EXPECT_GT(swarm_->node(kFounder).stats().admission_refused, refused_before);
  // The expired node itself knows, and says why (its daemon stops on it).
  const absl::Status own = swarm_->node(kShortLease).SelfAdmission();
  EXPECT_EQ(own.code(), absl::StatusCode::kFailedPrecondition) << own;
  EXPECT_TRUE(absl::StrContains(own.message(), "invite expired")) << own;
  EXPECT_TRUE(swarm_->node(kFounder).SelfAdmission().ok());
  // The eviction was reported to listeners as a death.
  bool reported = false;
  for (const SimSwarm::Transition& t : swarm_->transitions()) {
    reported |= t.observer == kFounder && t.subject == kShortLease &&
                t.state == proto::MEMBER_STATE_DEAD;
  }
  EXPECT_TRUE(reported);
}

// Note [Revocation]: a founder-signed list, handed to any one member,
// spreads to every member; the revoked node is evicted everywhere and
// refused from then on, a later joiner learns the list in its first
// push-pull, and a forged or older list changes nothing.
TEST_F(AdmissionSwarmTest, ARevocationListSpreadsAndEvictsTheNodesItNames) {
  ASSERT_TRUE(Join(kFounder, kFounder).ok());
  ASSERT_TRUE(Join(kInvited, kFounder).ok());
  ASSERT_NE(swarm_->RunUntil([&] { return InViewOf(kFounder, kInvited) &&
                                          InViewOf(kInvited, kFounder); },
                             absl::Seconds(10)),
            absl::InfiniteDuration());
  proto::RevocationList list;
  list.set_swarm_name("unit");
  list.set_serial(1);
  list.add_node_ids(swarm_->id(kInvited).Bytes());
  const proto::SignedRevocationList forged = *SignRevocations(swarm_->identity(kForged), list);
  EXPECT_EQ(swarm_->node(kFounder).AddRevocations(forged).code(),
            absl::StatusCode::kUnauthenticated);
  const proto::SignedRevocationList signed_list =
      *SignRevocations(swarm_->identity(kFounder), list);
  // Handed to the founder here; its next messages carry it to everyone.
  ASSERT_TRUE(swarm_->node(kFounder).AddRevocations(signed_list).ok());
  EXPECT_EQ(swarm_->node(kFounder).AddRevocations(signed_list).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(swarm_->node(kFounder).GetView().Find(swarm_->id(kInvited)), nullptr);
  // Note [Revocation notice]: nobody gossips to the evicted node any more,
  // but its next probe of the founder is answered with the list: it knows
  // it is out (its daemon stops on it). Before, it never learnt: it probed
  // on, refused, for as long as it ran.
  const absl::Duration told = swarm_->RunUntil(
      [&] { return !swarm_->node(kInvited).SelfAdmission().ok(); }, absl::Seconds(10));
  EXPECT_NE(told, absl::InfiniteDuration()) << "the revoked node never learnt it is out";
  std::printf("FIGURE revoked_node_told_after_ms=%lld\n",
              static_cast<long long>(absl::ToInt64Milliseconds(told)));
  EXPECT_LE(told, absl::Seconds(2));
  EXPECT_GT(swarm_->node(kFounder).stats().revocation_notices, 0u);
  // What the daemon's data-service quotas ask (by id only).
  EXPECT_TRUE(swarm_->node(kFounder).IsRevoked(swarm_->id(kInvited)));
  EXPECT_FALSE(swarm_->node(kFounder).IsRevoked(swarm_->id(kShortLease)));

  // kShortLease joins through the revoked node's old peer and learns the
  // list in the push-pull of its join.
  ASSERT_TRUE(Join(kShortLease, kFounder).ok());
  ASSERT_NE(swarm_->RunUntil([&] {
              return swarm_->node(kShortLease).stats().revocation_serial == 1 &&
                     InViewOf(kFounder, kShortLease);
            },
                             absl::Seconds(10)),
            absl::InfiniteDuration());
  swarm_->Run(absl::Seconds(20));  // kInvited keeps pinging and push-pulling
  for (int member : {kFounder, kShortLease}) {
    EXPECT_EQ(swarm_->node(member).GetView().Find(swarm_->id(kInvited)), nullptr) << member;
    EXPECT_TRUE(InViewOf(member, member == kFounder ? kShortLease : kFounder));
  }
  EXPECT_GT(swarm_->node(kFounder).stats().admission_refused, 0u);
  EXPECT_EQ(swarm_->node(kFounder).stats().revocations_rejected, 1u);  // the forged one
  // The revoked node holds the list (from the notice) and says why it is
  // out; the notice gave it nothing else (no member joined its view).
  EXPECT_EQ(swarm_->node(kInvited).AddRevocations(signed_list).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(swarm_->node(kInvited).GetView().Find(swarm_->id(kShortLease)), nullptr);
  const absl::Status own = swarm_->node(kInvited).SelfAdmission();
  EXPECT_EQ(own.code(), absl::StatusCode::kFailedPrecondition) << own;
  EXPECT_TRUE(absl::StrContains(own.message(), "revoked this node")) << own;
  EXPECT_TRUE(swarm_->node(kFounder).SelfAdmission().ok());

  // A newer list revokes kShortLease's invite (by its id); it spreads by
  // gossip from the member it is given to, and the founder evicts it.
  list.set_serial(2);
  proto::SignedInvite short_lease_invite;
  {
    proto::Invite inv;
    inv.set_nonce(kNonce);
    inv.SerializeToString(short_lease_invite.mutable_invite());
  }
  list.add_invite_ids(InviteId(short_lease_invite));
  ASSERT_TRUE(
      swarm_->node(kShortLease).AddRevocations(*SignRevocations(swarm_->identity(kFounder), list))
          .ok());
  const absl::Duration took = swarm_->RunUntil(
      [&] { return swarm_->node(kFounder).GetView().Find(swarm_->id(kShortLease)) == nullptr; },
      absl::Seconds(10));
  ASSERT_NE(took, absl::InfiniteDuration());
  EXPECT_LE(took, absl::Seconds(2)) << took;
  std::printf("FIGURE revocation_list_gossiped_and_applied_after_ms=%lld\n",
              static_cast<long long>(absl::ToInt64Milliseconds(took)));
  EXPECT_EQ(swarm_->node(kFounder).stats().revocation_serial, 2u);
  EXPECT_EQ(swarm_->node(kFounder).stats().evicted, 2u);
  // Evicted for its invite: revoked by id from then on.
  EXPECT_TRUE(swarm_->node(kFounder).IsRevoked(swarm_->id(kShortLease)));
  // The older list, offered again, changes nothing.
  EXPECT_EQ(swarm_->node(kFounder).AddRevocations(signed_list).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(swarm_->node(kFounder).stats().revocation_serial, 2u);
}

TEST_F(AdmissionSwarmTest, ARequestWithoutAnAdmittedSenderGetsNothing) {
  ASSERT_TRUE(Join(kFounder, kFounder).ok());
  ASSERT_TRUE(Join(kInvited, kFounder).ok());
  swarm_->Run(absl::Seconds(2));
  // A stranger's ping and push-pull without a record of itself: refused,
  // and no member table comes back.
  proto::PingRequest req;
  req.set_protocol_version(proto::kProtocolVersion);
  req.set_swarm_id(kUnitSwarm);
  req.set_from(swarm_->id(kUninvited).Bytes());
  req.set_seq(1);
  GossipTransport* net =
      swarm_->net().AddEndpoint("stranger:1", swarm_->id(kUninvited));
  auto send = [&](const proto::PingRequest& r) {
    absl::StatusOr<proto::Ack> got = absl::UnknownError("no reply");
    net->Ping({swarm_->address(kFounder), swarm_->id(kFounder)}, r, absl::Seconds(1),
              [&](absl::StatusOr<proto::Ack> ack) { got = std::move(ack); });
    swarm_->Run(absl::Milliseconds(100));
    return got;
  };
  absl::StatusOr<proto::Ack> bare = send(req);
  EXPECT_EQ(bare.status().code(), absl::StatusCode::kPermissionDenied) << bare.status();
  EXPECT_NE(bare.status().message().find("not a member"), std::string::npos) << bare.status();
  proto::PushPullRequest pp;
  pp.set_protocol_version(proto::kProtocolVersion);
  pp.set_swarm_id(kUnitSwarm);
  pp.set_from(swarm_->id(kUninvited).Bytes());
  absl::StatusOr<proto::PushPullResponse> pulled = absl::UnknownError("pending");
  net->PushPull({swarm_->address(kInvited), swarm_->id(kInvited)}, pp, absl::Seconds(1),
                [&](absl::StatusOr<proto::PushPullResponse> r) { pulled = std::move(r); });
  swarm_->Run(absl::Milliseconds(100));
  EXPECT_EQ(pulled.status().code(), absl::StatusCode::kPermissionDenied) << pulled.status();
  EXPECT_GE(swarm_->node(kFounder).stats().admission_refused, 1u);
}

}  // namespace
}  // namespace skipswarm::membership
