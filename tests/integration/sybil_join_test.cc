// Note [Joiners' budget] (common/peer_quota.h) on the simulated network: a
// Sybil flood of fresh stranger ids keeps the gossip budget all strangers
// share empty, and an honest node joins through the flooded seed all the
// same, because its join messages carry its own admissible record.
#include <iostream>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/peer_quota.h"
#include "gtest/gtest.h"
#include "identity/test_identity.h"
#include "membership/admission.h"
#include "membership/membership.h"
#include "membership/record.h"
#include "proto/version.h"
#include "sim/sim_swarm.h"
#include "tests/integration/unit_membership_options.h"

namespace skipswarm::membership {
namespace {

using sim::SimNetwork;
using sim::SimSwarm;

// 1,000 fresh ids, each pinging the seed at its own stranger rate (10/s),
// together one ping every 0.1 ms: fifty times the budget all strangers
// share (MembershipOptions::all_strangers_quota, 200/s), so each message
// the shared bucket refills is taken within 0.1 ms.
constexpr int kSybils = 1000;
constexpr absl::Duration kStep = absl::Microseconds(100);

struct Flood {
  std::vector<common::NodeId> ids;
  // Sybils that carry a record of their own that they signed (none: only
  // ids); each is the sender of every 100th ping.
  std::vector<proto::SignedNodeRecord> records;
  int next = 0;
  uint64_t sent = 0, served = 0, refused = 0;

  Flood() {
    for (int i = 0; i < kSybils; ++i) {
      ids.push_back(common::NodeId::ForName(absl::StrCat("sybil", i)));
    }
  }
  // Ten Sybils with keys sign records of themselves (no invite, no work).
  void SignRecords(absl::Time now) {
    for (char c = 'a'; c < 'a' + 10; ++c) {
      std::unique_ptr<identity::Identity> key = identity::TestIdentity(c);
      proto::NodeRecord r;
      r.set_swarm_id(kUnitSwarm);
      r.add_addresses(absl::StrCat("sybil-", std::string(1, c), ":1"));
      r.set_memory_slots(1);
      r.set_incarnation(1);
      records.push_back(*SignRecord(*key, r, now));
      ids[records.size() - 1] = key->id();
    }
  }
  // One step's ping (each id once per 100 ms).
  void Send(Membership& seed) {
    {
      const int i = next;
      const common::NodeId& id = ids[i];
      next = (next + 1) % kSybils;
      ++sent;
      proto::PingRequest ping;
      ping.set_protocol_version(proto::kProtocolVersion);
      ping.set_swarm_id(kUnitSwarm);
      ping.set_from(id.Bytes());
      ping.set_seq(1);
      if (i < static_cast<int>(records.size())) *ping.mutable_gossip()->add_records() = records[i];
      seed.HandlePing({absl::StrCat("sybil:", i), id}, ping,
                      [this](absl::StatusOr<proto::Ack> ack) {
                        served += ack.ok();
                        refused += absl::IsResourceExhausted(ack.status());
                      });
    }
  }
};

// How long the joiner (node 2) takes to enter the seed's view during the
// flood; InfiniteDuration past `limit`.
absl::Duration JoinDuringFlood(SimSwarm& swarm, Flood& flood, absl::Duration limit,
                               int joiner) {
  for (int i = 0; i < 10000; ++i) {  // one second of flood first: the shared budget is empty
    flood.Send(swarm.node(0));
    swarm.Run(kStep);
  }
  swarm.StartAndJoin(joiner, {0});
  absl::Duration t;
  while (t < limit) {
    if (swarm.node(0).GetView().Find(swarm.id(joiner)) != nullptr) return t;
    flood.Send(swarm.node(0));
    swarm.Run(kStep);
    t += kStep;
  }
  return absl::InfiniteDuration();
}

TEST(SybilJoinTest, AnHonestNodeJoinsThroughASeedFloodedBySybils) {
  MembershipOptions o = UnitMembershipOptions();
  o.quota_max_hold = common::kDaemonMaxHold;  // as the daemons run
  SimSwarm swarm(42, SimNetwork::Options(), o);
  for (int i = 0; i < 2; ++i) swarm.AddNode({static_cast<uint32_t>(i)});
  swarm.StartAll(0);
  ASSERT_NE(swarm.RunUntil([&] { return swarm.Converged(); }, absl::Seconds(10)),
            absl::InfiniteDuration());
  Flood flood;
  const absl::Duration took =
      JoinDuringFlood(swarm, flood, absl::Seconds(10), swarm.AddNode());
  const auto refusals = swarm.node(0).quota().refusals();
  const uint64_t strangers =
      refusals.count({common::QuotaReason::kStrangers, common::PeerClass::kStranger})
          ? refusals.at({common::QuotaReason::kStrangers, common::PeerClass::kStranger})
          : 0;
  std::cout << "FIGURE sybil_join_seconds=" << absl::ToDoubleSeconds(took)
            << " sybil_pings_served=" << flood.served << " sybil_pings_refused=" << flood.refused
            << " refused_strangers=" << strangers << "\n";
  // The flood is held to the shared budget: at most its burst and rate.
  EXPECT_GT(strangers, 0u);
  EXPECT_LE(flood.served, 400u + 200u * 12);
  // The joiner's join push-pull (its signed record) draws on the joiners'
  // budget: in at its first try, well inside its first backoff.
  EXPECT_LE(took, absl::Seconds(1));
  EXPECT_GE(swarm.node(0).quota().joiners_admitted(), 1u);
  swarm.Run(absl::Seconds(5));
  EXPECT_TRUE(swarm.Converged());
}

// In a swarm that admits by invitation, Sybils that sign records of
// themselves (no invite) prove nothing: they never draw on the joiners'
// budget, and the invited joiner still gets in at once.
TEST(SybilJoinTest, SelfSignedRecordsWithoutAnInviteProveNothing) {
  MembershipOptions o = UnitMembershipOptions();
  o.quota_max_hold = common::kDaemonMaxHold;
  SimSwarm probe(7, SimNetwork::Options(), o);
  for (int i = 0; i < 2; ++i) probe.AddNode();
  const identity::Identity& founder = probe.identity(0);
  o.policy.admission.mode = AdmissionMode::kInvite;
  o.policy.admission.swarm_name = "unit";
  o.policy.admission.founder_public_key = founder.public_key();
  SimSwarm swarm(7, SimNetwork::Options(), o);
  swarm.AddNode({0});
  swarm.StartAndJoin(0, {});
  const absl::Time now = swarm.clock().Now();
  const int joiner = swarm.AddNode(
      {1}, *MintInvite(founder, {"unit", now + absl::Hours(1), probe.id(1)},
                       std::string(kInviteNonceBytes, 'n')));
  Flood flood;
  flood.SignRecords(now);
  const absl::Duration took = JoinDuringFlood(swarm, flood, absl::Seconds(10), joiner);
  const uint64_t joiners = swarm.node(0).quota().joiners_admitted();
  std::cout << "FIGURE sybil_invite_join_seconds=" << absl::ToDoubleSeconds(took)
            << " joiners_admitted=" << joiners << " sybil_pings=" << flood.sent << "\n";
  EXPECT_LE(took, absl::Seconds(1));
  // Only the joiner's own requests (a push-pull, a ping or two) drew on it,
  // not the Sybils' 1 in 100 signed pings (about 100 of them).
  EXPECT_GE(joiners, 1u);
  EXPECT_LE(joiners, 5u);
  EXPECT_GE(flood.sent / 100, 100u);
  EXPECT_EQ(swarm.node(0).GetView().Find(flood.ids[0]), nullptr);
}

// A stranger's message that draws on the joiners' budget has its own record
// verified once: the check that proved the join is the one the records'
// verification takes (SenderRecordCheck), not a second signature check.
TEST(SybilJoinTest, AJoinersRecordIsVerifiedOnce) {
  MembershipOptions o = UnitMembershipOptions();
  o.quota_max_hold = common::kDaemonMaxHold;
  SimSwarm swarm(11, SimNetwork::Options(), o);
  swarm.AddNode({0});
  swarm.StartAndJoin(0, {});
  Flood flood;
  for (int i = 0; i < 10000; ++i) {  // the shared budget is empty
    flood.Send(swarm.node(0));
    swarm.Run(kStep);
  }
  flood.SignRecords(swarm.clock().Now());
  flood.next = 0;  // the next ping carries its sender's own signed record
  const uint64_t checked = swarm.node(0).stats().signatures_checked;
  const uint64_t joiners = swarm.node(0).quota().joiners_admitted();
  const uint64_t served = flood.served;
  flood.Send(swarm.node(0));
  swarm.Run(kStep);
  EXPECT_EQ(flood.served, served + 1);
  EXPECT_EQ(swarm.node(0).quota().joiners_admitted(), joiners + 1);
  EXPECT_EQ(swarm.node(0).stats().signatures_checked, checked + 1);
  EXPECT_NE(swarm.node(0).GetView().Find(flood.ids[0]), nullptr);
}

}  // namespace
}  // namespace skipswarm::membership
