// Membership unit behaviour on the simulated network: security checks
// (forged / replayed / stale records, wrong swarm, identity mismatch,
// allow-list), refutation, record updates, join diagnostics, link probing.
#include "identity/test_identity.h"
#include "membership/membership.h"

#include <algorithm>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>

#include "gtest/gtest.h"
#include "membership/link_stats.h"
#include "proto/version.h"
#include "sim/sim_swarm.h"
#include "tests/integration/unit_membership_options.h"

namespace skipswarm::membership {
namespace {

using sim::SimNetwork;
using sim::SimSwarm;

class MembershipTest : public ::testing::Test {
 protected:
  MembershipTest() : swarm_(42, SimNetwork::Options(), UnitMembershipOptions()) {
    for (int i = 0; i < 3; ++i) swarm_.AddNode({static_cast<uint32_t>(i)});
    swarm_.StartAll(0);
    EXPECT_NE(swarm_.RunUntil([&] { return swarm_.Converged(); }, absl::Seconds(10)),
              absl::InfiniteDuration());
    mallory_ = identity::TestIdentity('M');
    mallory_net_ = swarm_.net().AddEndpoint("mallory:1", mallory_->id());
  }

  proto::PingRequest Ping(const common::NodeId& from) {
    proto::PingRequest req;
    req.set_protocol_version(proto::kProtocolVersion);
    req.set_swarm_id(kUnitSwarm);
    req.set_from(from.Bytes());
    req.set_seq(1);
    return req;
  }

  // Sends `req` from mallory to node 0 and returns the reply.
  absl::StatusOr<proto::Ack> Send(const proto::PingRequest& req) {
    absl::StatusOr<proto::Ack> result = absl::UnknownError("no reply");
    mallory_net_->Ping({swarm_.address(0), swarm_.id(0)}, req, absl::Seconds(1),
                       [&](absl::StatusOr<proto::Ack> ack) { result = std::move(ack); });
    swarm_.Run(absl::Milliseconds(100));
    return result;
  }

  proto::NodeRecord RecordOf(int i) {
    const View view = swarm_.node(0).GetView();
    const MemberInfo* m = view.Find(swarm_.id(i));
    proto::NodeRecord r;
    if (m != nullptr) r.set_incarnation(m->incarnation);
    return r;
  }

  SimSwarm swarm_;
  std::unique_ptr<identity::Identity> mallory_;
  GossipTransport* mallory_net_;
};

proto::NodeRecord ValidRecord() {
  proto::NodeRecord r;
  r.set_swarm_id(kUnitSwarm);
  r.add_addresses("mallory:1");
  r.set_memory_slots(1);
  r.set_incarnation(1'900'000'000'000);
  return r;
}

TEST_F(MembershipTest, ValidPeerRecordIsAccepted) {
  proto::PingRequest req = Ping(mallory_->id());
  *req.mutable_gossip()->add_records() =
      *SignRecord(*mallory_, ValidRecord(), swarm_.clock().Now());
  ASSERT_TRUE(Send(req).ok());
  EXPECT_NE(swarm_.node(0).GetView().Find(mallory_->id()), nullptr);
}

TEST_F(MembershipTest, ForgedRecordIsRejectedAndViewUnchanged) {
  const uint64_t digest = swarm_.node(0).GetView().digest();
  proto::PingRequest req = Ping(mallory_->id());
  auto signed_record = *SignRecord(*mallory_, ValidRecord(), swarm_.clock().Now());
  (*signed_record.mutable_signature())[0] ^= 1;
  *req.mutable_gossip()->add_records() = signed_record;
  ASSERT_TRUE(Send(req).ok());  // the ping itself is fine
  EXPECT_EQ(swarm_.node(0).GetView().Find(mallory_->id()), nullptr);
  EXPECT_EQ(swarm_.node(0).GetView().digest(), digest);
  EXPECT_GE(swarm_.node(0).stats().records_rejected, 1u);
}

TEST_F(MembershipTest, RecordForSomeoneElsesIdIsRejected) {
  // Mallory signs a record that claims node 1's id, to take over its stages.
  proto::NodeRecord r = ValidRecord();
  auto s = *SignRecord(*mallory_, r, swarm_.clock().Now());
  proto::NodeRecord inner;
  inner.ParseFromString(s.record());
  inner.set_node_id(swarm_.id(1).Bytes());
  inner.set_incarnation(RecordOf(1).incarnation() + 100);
  inner.SerializeToString(s.mutable_record());
  s.set_signature(*mallory_->Sign(s.record()));
  proto::PingRequest req = Ping(mallory_->id());
  *req.mutable_gossip()->add_records() = s;
  const uint64_t before = RecordOf(1).incarnation();
  ASSERT_TRUE(Send(req).ok());
  EXPECT_EQ(RecordOf(1).incarnation(), before);
  EXPECT_GE(swarm_.node(0).stats().records_rejected, 1u);
}

TEST_F(MembershipTest, ReplayedOldRecordDoesNotRollBackTheView) {
  // Capture node 1's current record, then let it change its stages.
  proto::PushPullRequest pp;
  pp.set_protocol_version(proto::kProtocolVersion);
  pp.set_swarm_id(kUnitSwarm);
  pp.set_from(mallory_->id().Bytes());
  proto::SignedNodeRecord old_record;
  mallory_net_->PushPull({swarm_.address(1), swarm_.id(1)}, pp, absl::Seconds(1),
                         [&](absl::StatusOr<proto::PushPullResponse> r) {
                           ASSERT_TRUE(r.ok());
                           for (const auto& rec : r->gossip().records()) {
                             proto::NodeRecord n;
                             n.ParseFromString(rec.record());
                             if (n.node_id() == swarm_.id(1).Bytes()) old_record = rec;
                           }
                         });
  swarm_.Run(absl::Milliseconds(100));
  ASSERT_FALSE(old_record.record().empty());
  ASSERT_TRUE(swarm_.node(1).UpdateLocalRecord([](proto::NodeRecord* r) {
    r->clear_stages();
    r->add_stages(7);
  }).ok());
  swarm_.Run(absl::Seconds(1));
  const View view = swarm_.node(0).GetView();
  const MemberInfo* now = view.Find(swarm_.id(1));
  ASSERT_EQ(now->stages, std::vector<uint32_t>{7});
  proto::PingRequest req = Ping(mallory_->id());
  *req.mutable_gossip()->add_records() = old_record;
  ASSERT_TRUE(Send(req).ok());
  EXPECT_EQ(swarm_.node(0).GetView().Find(swarm_.id(1))->stages,
            std::vector<uint32_t>{7});
}

TEST_F(MembershipTest, StaleRecordIsRejected) {
  proto::PingRequest req = Ping(mallory_->id());
  *req.mutable_gossip()->add_records() = *SignRecord(
      *mallory_, ValidRecord(), swarm_.clock().Now() - absl::Hours(48));
  ASSERT_TRUE(Send(req).ok());
  EXPECT_EQ(swarm_.node(0).GetView().Find(mallory_->id()), nullptr);
  EXPECT_GE(swarm_.node(0).stats().records_rejected, 1u);
}

TEST_F(MembershipTest, WrongSwarmAndWrongVersionAreRefused) {
  proto::PingRequest req = Ping(mallory_->id());
  req.set_swarm_id("other-swarm");
  auto ack = Send(req);
  EXPECT_EQ(ack.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(ack.status().message().find("swarm"), std::string::npos);
  req = Ping(mallory_->id());
  req.set_protocol_version(proto::PROTOCOL_VERSION_UNSPECIFIED);
  EXPECT_EQ(Send(req).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_GE(swarm_.node(0).stats().requests_rejected, 2u);
}

TEST_F(MembershipTest, PeerClaimingAnotherIdIsRefused) {
  // The transport authenticated mallory, but the request says node 2.
  auto ack = Send(Ping(swarm_.id(2)));
  EXPECT_EQ(ack.status().code(), absl::StatusCode::kUnauthenticated);
}

TEST_F(MembershipTest, FalseSuspicionIsRefutedWithHigherIncarnation) {
  const uint64_t before = RecordOf(2).incarnation();
  proto::PingRequest req = Ping(mallory_->id());
  // Mallory is a member (her record rides along) and signs her opinion.
  *req.mutable_gossip()->add_records() =
      *SignRecord(*mallory_, ValidRecord(), swarm_.clock().Now());
  proto::MembershipUpdate* u = req.mutable_gossip()->add_updates();
  u->set_node_id(swarm_.id(2).Bytes());
  u->set_state(proto::MEMBER_STATE_DEAD);
  u->set_incarnation(before);
  ASSERT_TRUE(SignOpinion(*mallory_, kUnitSwarm, u).ok());
  ASSERT_TRUE(Send(req).ok());
  // Hearsay death only makes node 0 suspect node 2 (and probe it at once,
  // telling it) ...
  int suspected = 0, dead = 0;
  for (const auto& t : swarm_.transitions()) {
    if (t.observer == 0 && t.subject == 2) {
      suspected += t.state == proto::MEMBER_STATE_SUSPECT;
      dead += t.state == proto::MEMBER_STATE_DEAD;
    }
  }
  EXPECT_EQ(suspected, 1);
  EXPECT_EQ(dead, 0);
  swarm_.Run(absl::Seconds(2));
  // ... and node 2 refutes before anyone's timer runs out.
  EXPECT_GT(RecordOf(2).incarnation(), before);
  EXPECT_EQ(swarm_.node(0).GetView().Find(swarm_.id(2))->state,
            proto::MEMBER_STATE_ALIVE);
  EXPECT_TRUE(swarm_.Converged());
  EXPECT_GE(swarm_.node(2).stats().refutations, 1u);
}

// The measured attack: a stranger's ping tells the victim it is suspected at
// incarnation 2^64-2, so its refutation signs 2^64-1; the next suspicion
// wrapped its refutation to 0, older than every copy peers held, and every
// peer declared it DEAD for good. Five pings sufficed.
TEST_F(MembershipTest, ForgedSuspicionNearTheIncarnationCeilingEvictsNobody) {
  const int victim = 2;
  const uint64_t before = RecordOf(victim).incarnation();
  auto forged = [&](uint64_t incarnation, proto::MemberState state) {
    proto::PingRequest req = Ping(mallory_->id());
    proto::MembershipUpdate* u = req.mutable_gossip()->add_updates();
    u->set_node_id(swarm_.id(victim).Bytes());
    u->set_state(state);
    u->set_incarnation(incarnation);
    u->set_reporter(mallory_->id().Bytes());
    return req;
  };
  auto send_to = [&](int node, const proto::PingRequest& req) {
    swarm_.node(node).HandlePing({"mallory:1", mallory_->id()}, req,
                                 [](absl::StatusOr<proto::Ack>) {});
  };
  const uint64_t kTop = std::numeric_limits<uint64_t>::max();
  send_to(victim, forged(kTop - 1, proto::MEMBER_STATE_SUSPECT));
  swarm_.Run(absl::Seconds(1));
  for (int node = 0; node < 3; ++node) {
    send_to(node, forged(kTop, proto::MEMBER_STATE_SUSPECT));
    send_to(node, forged(RecordOf(victim).incarnation(), proto::MEMBER_STATE_DEAD));
  }
  swarm_.Run(absl::Seconds(10));
  for (int node = 0; node < 3; ++node) {
    const MemberInfo* m = swarm_.node(node).GetView().Find(swarm_.id(victim));
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->state, proto::MEMBER_STATE_ALIVE) << "view of node " << node;
    EXPECT_LE(m->incarnation, before + 2) << "view of node " << node;
  }
  EXPECT_GE(swarm_.node(victim).stats().opinions_rejected, 1u);
  for (const auto& t : swarm_.transitions()) {
    EXPECT_FALSE(t.subject == victim && t.state == proto::MEMBER_STATE_DEAD);
  }
}

// A member may suspect anybody, signed; the victim refutes within a probe
// period and stays live in every view, and a signed opinion that names an
// incarnation far above the victim's cannot spend its incarnation space.
TEST_F(MembershipTest, MembersSuspicionIsRefutedAndAFarIncarnationIgnored) {
  const int victim = 1;
  proto::PingRequest join = Ping(mallory_->id());
  *join.mutable_gossip()->add_records() =
      *SignRecord(*mallory_, ValidRecord(), swarm_.clock().Now());
  for (int node = 0; node < 3; ++node) {
    swarm_.node(node).HandlePing({"mallory:1", mallory_->id()}, join,
                                 [](absl::StatusOr<proto::Ack>) {});
  }
  const uint64_t before = RecordOf(victim).incarnation();
  auto signed_suspicion = [&](uint64_t incarnation) {
    proto::PingRequest req = Ping(mallory_->id());
    proto::MembershipUpdate* u = req.mutable_gossip()->add_updates();
    u->set_node_id(swarm_.id(victim).Bytes());
    u->set_state(proto::MEMBER_STATE_SUSPECT);
    u->set_incarnation(incarnation);
    EXPECT_TRUE(SignOpinion(*mallory_, kUnitSwarm, u).ok());
    return req;
  };
  swarm_.node(victim).HandlePing({"mallory:1", mallory_->id()},
                                 signed_suspicion(before + (uint64_t{1} << 40)),
                                 [](absl::StatusOr<proto::Ack>) {});
  EXPECT_EQ(swarm_.node(victim).stats().refutations, 0u);
  swarm_.node(0).HandlePing({"mallory:1", mallory_->id()}, signed_suspicion(before),
                            [](absl::StatusOr<proto::Ack>) {});
  EXPECT_EQ(swarm_.node(0).GetView().Find(swarm_.id(victim))->state,
            proto::MEMBER_STATE_SUSPECT);
  swarm_.Run(absl::Seconds(1));  // ~3 probe periods
  for (int node = 0; node < 3; ++node) {
    const MemberInfo* m = swarm_.node(node).GetView().Find(swarm_.id(victim));
    EXPECT_EQ(m->state, proto::MEMBER_STATE_ALIVE) << "view of node " << node;
    EXPECT_GT(m->incarnation, before);
    EXPECT_LT(m->incarnation, before + 10);
  }
}

// Unsigned or wrongly signed suspicion changes nobody's view.
TEST_F(MembershipTest, UnsignedOrForgedSuspicionIsIgnored) {
  const uint64_t inc = RecordOf(1).incarnation();
  proto::PingRequest req = Ping(mallory_->id());
  *req.mutable_gossip()->add_records() =
      *SignRecord(*mallory_, ValidRecord(), swarm_.clock().Now());
  proto::MembershipUpdate* unsigned_u = req.mutable_gossip()->add_updates();
  unsigned_u->set_node_id(swarm_.id(1).Bytes());
  unsigned_u->set_state(proto::MEMBER_STATE_SUSPECT);
  unsigned_u->set_incarnation(inc);
  unsigned_u->set_reporter(swarm_.id(2).Bytes());  // speaks for node 2
  proto::MembershipUpdate* forged = req.mutable_gossip()->add_updates();
  *forged = *unsigned_u;
  ASSERT_TRUE(SignOpinion(*mallory_, kUnitSwarm, forged).ok());
  forged->set_reporter(swarm_.id(2).Bytes());  // mallory's signature, node 2's name
  ASSERT_TRUE(Send(req).ok());
  EXPECT_EQ(swarm_.node(0).GetView().Find(swarm_.id(1))->state,
            proto::MEMBER_STATE_ALIVE);
  EXPECT_GE(swarm_.node(0).stats().opinions_rejected, 1u);
}

// The measured flood: pings of 25,000 validly signed records cost the
// victim seconds each under the membership lock. Now the message is refused
// whole before any signature is checked.
TEST_F(MembershipTest, PingOf25000RecordsIsRefusedWithoutASignatureCheck) {
  const uint64_t checked = swarm_.node(0).stats().signatures_checked;
  const uint64_t digest = swarm_.node(0).GetView().digest();
  proto::PingRequest req = Ping(mallory_->id());
  const proto::SignedNodeRecord record =
      *SignRecord(*mallory_, ValidRecord(), swarm_.clock().Now());
  for (int i = 0; i < 25000; ++i) *req.mutable_gossip()->add_records() = record;
  std::optional<absl::Status> reply;
  swarm_.node(0).HandlePing({"mallory:1", mallory_->id()}, req,
                            [&](absl::StatusOr<proto::Ack> ack) { reply = ack.status(); });
  ASSERT_TRUE(reply.has_value());
  // A stranger's 3.4 MB is over its byte quota first (Note [Peer quotas]);
  // a member's would be refused for its records.
  EXPECT_TRUE(absl::IsInvalidArgument(*reply) || absl::IsResourceExhausted(*reply)) << *reply;
  EXPECT_EQ(swarm_.node(0).stats().signatures_checked, checked);
  EXPECT_GE(swarm_.node(0).stats().messages_refused, 1u);
  EXPECT_EQ(swarm_.node(0).GetView().digest(), digest);
  EXPECT_EQ(swarm_.node(0).GetView().Find(mallory_->id()), nullptr);
}

// One sender's requests pass a token bucket: a burst beyond it is refused
// before its gossip is looked at, and the sender is served again later.
TEST_F(MembershipTest, RequestFloodFromOneSenderIsRateLimited) {
  int ok = 0, limited = 0;
  for (int i = 0; i < 1000; ++i) {
    swarm_.node(0).HandlePing({"mallory:1", mallory_->id()}, Ping(mallory_->id()),
                              [&](absl::StatusOr<proto::Ack> ack) {
                                ok += ack.ok();
                                limited += absl::IsResourceExhausted(ack.status());
                              });
  }
  EXPECT_EQ(ok + limited, 1000);
  // mallory is no member: a stranger's burst (MembershipOptions::
  // stranger_quota, 20) instead of a member's (200).
  EXPECT_EQ(ok, 20);
  EXPECT_EQ(limited, 980);
  EXPECT_EQ((swarm_.node(0).quota().refusals()[{common::QuotaReason::kMessages,
                                                common::PeerClass::kStranger}]),
            980u);
  swarm_.Run(absl::Seconds(2));
  std::optional<absl::Status> later;
  swarm_.node(0).HandlePing({"mallory:1", mallory_->id()}, Ping(mallory_->id()),
                            [&](absl::StatusOr<proto::Ack> ack) { later = ack.status(); });
  ASSERT_TRUE(later.has_value());
  EXPECT_TRUE(later->ok()) << *later;
  EXPECT_TRUE(swarm_.Converged());  // the members were never throttled
  // A member's burst is ten times a stranger's.
  int member_ok = 0;
  for (int i = 0; i < 1000; ++i) {
    swarm_.node(0).HandlePing({"n1:1", swarm_.id(1)}, Ping(swarm_.id(1)),
                              [&](absl::StatusOr<proto::Ack> ack) { member_ok += ack.ok(); });
  }
  EXPECT_GE(member_ok, 200);
  EXPECT_LE(member_ok, 201);
}

// Note [Refusal hold]: with a hold (as the daemons run), a stranger that
// asks again at once is answered only when its bucket would admit it again,
// so a client that waits for each answer gets about its budget's rate.
TEST(MembershipHoldTest, ARepeatedRefusalIsAnsweredAfterTheHold) {
  MembershipOptions o = UnitMembershipOptions();
  o.quota_max_hold = absl::Seconds(1);
  SimSwarm swarm(42, SimNetwork::Options(), o);
  for (int i = 0; i < 2; ++i) swarm.AddNode({static_cast<uint32_t>(i)});
  swarm.StartAll(0);
  ASSERT_NE(swarm.RunUntil([&] { return swarm.Converged(); }, absl::Seconds(10)),
            absl::InfiniteDuration());
  std::unique_ptr<identity::Identity> mallory = identity::TestIdentity('M');
  proto::PingRequest ping;
  ping.set_protocol_version(proto::kProtocolVersion);
  ping.set_swarm_id(kUnitSwarm);
  ping.set_from(mallory->id().Bytes());
  ping.set_seq(1);
  int answered = 0, limited = 0;
  auto send = [&] {
    swarm.node(0).HandlePing({"mallory:1", mallory->id()}, ping,
                             [&](absl::StatusOr<proto::Ack> ack) {
                               ++answered;
                               limited += absl::IsResourceExhausted(ack.status());
                             });
  };
  for (int i = 0; i < 21; ++i) send();  // the stranger's burst (20) and one
  EXPECT_EQ(answered, 21);               // its first refusal: at once
  EXPECT_EQ(limited, 1);
  send();  // refused again within the repeat window: held
  EXPECT_EQ(answered, 21);
  // stranger_quota refills 10 messages/s: one message in 0.1 s.
  swarm.Run(absl::Milliseconds(90));
  EXPECT_EQ(answered, 21);
  swarm.Run(absl::Milliseconds(20));
  EXPECT_EQ(answered, 22);
  EXPECT_EQ(limited, 2);
  EXPECT_EQ(swarm.node(0).quota().held_refusals(), 1u);
  EXPECT_TRUE(swarm.Converged());
}

TEST_F(MembershipTest, ForgedLinkSamplesAreIgnored) {
  proto::PingRequest req = Ping(mallory_->id());
  proto::LinkSample* s = req.mutable_gossip()->add_links();
  s->set_from(swarm_.id(1).Bytes());  // not the sender
  s->set_to(swarm_.id(2).Bytes());
  s->set_rtt_us(1);
  s->set_measured_at_unix_ms(absl::ToUnixMillis(swarm_.clock().Now()) + 10'000);
  ASSERT_TRUE(Send(req).ok());
  for (const LinkInfo& l : swarm_.node(0).GetView().links) {
    EXPECT_FALSE(l.from == swarm_.id(1) && l.to == swarm_.id(2) &&
                 l.rtt == absl::Microseconds(1));
  }
}

TEST_F(MembershipTest, RecordUpdatesReachEveryViewAndListeners) {
  ASSERT_TRUE(swarm_.node(2).SetComputeSpeed(0.004).ok());
  swarm_.Run(absl::Seconds(1));
  for (int i = 0; i < 3; ++i) {
    EXPECT_DOUBLE_EQ(
        swarm_.node(i).GetView().Find(swarm_.id(2))->seconds_per_layer_per_sample,
        0.004);
  }
  EXPECT_TRUE(swarm_.Converged());
  EXPECT_FALSE(swarm_.node(2).SetComputeSpeed(-1).ok());
}

// Note [Slots re-announced]: an out of memory's lowered slots reach every
// view (what the planners read); only a lowering re-signs the record.
TEST_F(MembershipTest, LoweredMemorySlotsReachEveryView) {
  const MemberInfo before = *swarm_.node(2).GetView().Find(swarm_.id(2));
  ASSERT_GE(before.memory_slots, 3u);
  absl::StatusOr<bool> lowered = swarm_.node(2).LowerMemorySlots(before.memory_slots - 1);
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  EXPECT_TRUE(*lowered);
  swarm_.Run(absl::Seconds(1));
  for (int i = 0; i < 3; ++i) {
    const MemberInfo* m = swarm_.node(i).GetView().Find(swarm_.id(2));
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->memory_slots, before.memory_slots - 1) << "view of node " << i;
    EXPECT_GT(m->incarnation, before.incarnation);
  }
  EXPECT_TRUE(swarm_.Converged());
  const uint64_t signed_at = swarm_.node(2).GetView().Find(swarm_.id(2))->incarnation;
  // Not fewer: nothing re-signed.
  for (uint32_t same_or_more : {before.memory_slots - 1, before.memory_slots}) {
    lowered = swarm_.node(2).LowerMemorySlots(same_or_more);
    ASSERT_TRUE(lowered.ok());
    EXPECT_FALSE(*lowered);
  }
  EXPECT_EQ(swarm_.node(2).GetView().Find(swarm_.id(2))->incarnation, signed_at);
  EXPECT_FALSE(swarm_.node(2).LowerMemorySlots(0).ok());
}

TEST_F(MembershipTest, AnnounceReachesEveryLiveMemberBeforeDone) {
  ASSERT_TRUE(swarm_.node(2).UpdateLocalRecord([](proto::NodeRecord* r) {
    r->set_iteration(17);
  }).ok());
  int reached = -1, asked = -1;
  bool everyone_knew = false;
  swarm_.node(2).Announce([&](int r, int a) {
    reached = r;
    asked = a;
    everyone_knew = true;
    for (int i = 0; i < 2; ++i) {
      everyone_knew &= swarm_.node(i).GetView().Find(swarm_.id(2))->iteration == 17;
    }
  });
  swarm_.Run(absl::Seconds(1));
  EXPECT_EQ(asked, 2);
  EXPECT_EQ(reached, 2);
  EXPECT_TRUE(everyone_knew);
}

TEST_F(MembershipTest, LeaveSignsTheLastEditTogetherWithLeft) {
  bool done = false;
  swarm_.node(1).Leave([](proto::NodeRecord* r) { r->set_iteration(41); }, [&] { done = true; });
  swarm_.Run(absl::Seconds(1));
  EXPECT_TRUE(done);
  for (int i : {0, 2}) {
    const View view = swarm_.node(i).GetView();  // Find points into it
    const MemberInfo* m = view.Find(swarm_.id(1));
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->state, proto::MEMBER_STATE_LEFT);
    EXPECT_EQ(m->iteration, 41u);
  }
}

TEST_F(MembershipTest, ReachabilitySelfCheckTellsANodeBehindNat) {
  absl::Status ok = absl::UnknownError("pending");
  swarm_.node(1).CheckReachability([&](absl::Status s) { ok = s; });
  swarm_.Run(absl::Seconds(2));
  EXPECT_TRUE(ok.ok()) << ok;
  // Node 2 can reach out, but nobody can reach in (a NAT without forwarding):
  // model it by advertising an address where nothing listens.
  ASSERT_TRUE(swarm_.node(2).UpdateLocalRecord([](proto::NodeRecord* r) {
    r->set_addresses(0, "behind-nat:7000");
  }).ok());
  swarm_.Run(absl::Seconds(1));
  absl::Status nat = absl::UnknownError("pending");
  swarm_.node(2).CheckReachability([&](absl::Status s) { nat = s; });
  swarm_.Run(absl::Seconds(2));
  EXPECT_EQ(nat.code(), absl::StatusCode::kFailedPrecondition) << nat;
  EXPECT_NE(nat.message().find("NAT"), std::string::npos);
}

// Note [Outbound-only members]: node 2 can reach out but nobody can reach
// in (its address is one where nothing listens). `outbound_only`: whether it
// says so in its record. Returns how often nodes 0 and 1 saw it turn
// SUSPECT or DEAD over a minute.
int FalseVerdictsAboutANodeBehindNat(bool outbound_only) {
  SimSwarm swarm(42, SimNetwork::Options(), UnitMembershipOptions());
  for (int i = 0; i < 3; ++i) swarm.AddNode({static_cast<uint32_t>(i)});
  swarm.StartAll(0);
  EXPECT_NE(swarm.RunUntil([&] { return swarm.Converged(); }, absl::Seconds(10)),
            absl::InfiniteDuration());
  EXPECT_TRUE(swarm.node(2).UpdateLocalRecord([&](proto::NodeRecord* r) {
    r->set_addresses(0, "behind-nat:7000");
    r->set_outbound_only(outbound_only);
  }).ok());
  const size_t before = swarm.transitions().size();
  swarm.Run(absl::Seconds(60));
  int verdicts = 0;
  for (size_t i = before; i < swarm.transitions().size(); ++i) {
    const SimSwarm::Transition& t = swarm.transitions()[i];
    if (t.subject == 2 && t.observer != 2 &&
        (t.state == proto::MEMBER_STATE_SUSPECT || t.state == proto::MEMBER_STATE_DEAD)) {
      ++verdicts;
    }
  }
  return verdicts;
}

TEST(OutboundOnlyMemberTest, ANodeBehindNatDoesNotFlapWhenItsRecordSaysSo) {
  // Before: probes of the NATed node fail, so it flaps (or dies).
  EXPECT_GT(FalseVerdictsAboutANodeBehindNat(/*outbound_only=*/false), 0);
  EXPECT_EQ(FalseVerdictsAboutANodeBehindNat(/*outbound_only=*/true), 0);
}

TEST(OutboundOnlyMemberTest, ASilentOutboundOnlyMemberIsStillDeclaredDead) {
  SimSwarm swarm(7, SimNetwork::Options(), UnitMembershipOptions());
  for (int i = 0; i < 3; ++i) swarm.AddNode({static_cast<uint32_t>(i)});
  swarm.StartAll(0);
  ASSERT_NE(swarm.RunUntil([&] { return swarm.Converged(); }, absl::Seconds(10)),
            absl::InfiniteDuration());
  ASSERT_TRUE(swarm.node(2).UpdateLocalRecord([](proto::NodeRecord* r) {
    r->set_addresses(0, "behind-nat:7000");
    r->set_outbound_only(true);
  }).ok());
  swarm.Run(absl::Seconds(5));
  swarm.Kill(2);
  const absl::Duration t =
      swarm.RunUntil([&] { return swarm.AllSee(2, proto::MEMBER_STATE_DEAD); }, absl::Seconds(60));
  EXPECT_NE(t, absl::InfiniteDuration()) << "a crashed outbound-only member was never declared dead";
  EXPECT_LT(t, absl::Seconds(20));
}

TEST(MembershipJoinTest, UnreachableBootstrapNamesEachAddress) {
  MembershipOptions o = UnitMembershipOptions();
  o.join_rounds = 2;
  SimSwarm swarm(1, SimNetwork::Options(), o);
  swarm.AddNode();
  swarm.node(0).Start();
  absl::Status result = absl::UnknownError("pending");
  swarm.node(0).Join({"nowhere:1", "node0:7000"},  // itself is skipped
                     [&](absl::Status s) { result = s; });
  swarm.Run(absl::Seconds(10));
  EXPECT_EQ(result.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(result.message().find("nowhere:1"), std::string::npos);
}

TEST(MembershipJoinTest, AllowListKeepsStrangersOut) {
  MembershipOptions o = UnitMembershipOptions();
  SimSwarm probe(2, SimNetwork::Options(), o);
  for (int i = 0; i < 3; ++i) probe.AddNode();
  o.policy.admission.mode = AdmissionMode::kAllowList;
  o.policy.admission.founder_public_key = probe.identity(0).public_key();
  o.policy.admission.allowed_ids = {probe.id(1)};  // same seeds => same ids
  SimSwarm swarm(2, SimNetwork::Options(), o);
  for (int i = 0; i < 3; ++i) swarm.AddNode();
  swarm.StartAndJoin(0, {});
  swarm.StartAndJoin(1, {0});
  absl::Status stranger = absl::UnknownError("pending");
  swarm.node(2).Start();
  swarm.node(2).Join({swarm.address(0)}, [&](absl::Status s) { stranger = s; });
  swarm.Run(absl::Seconds(20));
  EXPECT_EQ(stranger.code(), absl::StatusCode::kPermissionDenied) << stranger;
  EXPECT_NE(stranger.message().find("allow-list"), std::string::npos) << stranger;
  EXPECT_EQ(swarm.node(0).GetView().Find(swarm.id(2)), nullptr);
  EXPECT_NE(swarm.node(0).GetView().Find(swarm.id(1)), nullptr);
}

TEST(LinkProbingTest, RttAndThroughputAreMeasuredSmoothedAndGossiped) {
  SimNetwork::Options net;
  net.latency = absl::Milliseconds(10);
  SimSwarm swarm(3, net, UnitMembershipOptions());
  for (int i = 0; i < 4; ++i) swarm.AddNode();
  swarm.net().SetLinkLatency(swarm.address(0), swarm.address(1),
                             absl::Milliseconds(40));
  swarm.StartAll(0);
  swarm.Run(absl::Seconds(20));
  swarm.node(0).ReportTransfer(swarm.id(2), 10'000'000, absl::Seconds(1));
  swarm.node(0).ReportTransfer(swarm.id(2), 20'000'000, absl::Seconds(1));
  swarm.Run(absl::Seconds(10));
  // Node 3 holds node 0's first-hand samples.
  View view = swarm.node(3).GetView();
  const LinkInfo* to1 = nullptr;
  const LinkInfo* to2 = nullptr;
  for (const LinkInfo& l : view.links) {
    if (l.from == swarm.id(0) && l.to == swarm.id(1)) to1 = &l;
    if (l.from == swarm.id(0) && l.to == swarm.id(2)) to2 = &l;
  }
  ASSERT_NE(to1, nullptr);
  ASSERT_NE(to2, nullptr);
  EXPECT_NEAR(absl::ToDoubleMilliseconds(to1->rtt), 80, 2);
  EXPECT_NEAR(absl::ToDoubleMilliseconds(to2->rtt), 20, 2);
  // EWMA with alpha 0.3: 10e6 then 0.3 * 20e6 + 0.7 * 10e6.
  EXPECT_NEAR(to2->bytes_per_second, 13e6, 1);
  // The throughput's own time travels with it, apart from the RTT's: pings
  // went on for 10 s after the transfers (Note [Planning from measured
  // links] in node/train/scheduler_planner.cc).
  EXPECT_LT(to2->throughput_measured_at, to2->measured_at - absl::Seconds(5));
  EXPECT_GE(to2->throughput_measured_at, to2->measured_at - absl::Seconds(11));
}

// A hostile member's signed suspicion about a live member, sent to every
// other member, to all but the victim or to one member: every honest view
// has the victim ALIVE again within one probe period of the suspicion
// reaching the first honest member, even just after its probe tick (Note [Forged suspicion] in
// membership/membership_impl.h), and a member that really crashes
// afterwards is still DEAD in every view within 3 s. The hostile member
// (the last node) is an ordinary member that also signs a suspicion.
TEST(ForgedSuspicionTest, VictimIsAliveEverywhereWithinOneProbePeriod) {
  constexpr int kHonest = 11;
  const MembershipOptions options = UnitMembershipOptions();
  absl::Duration worst_alive, worst_dead;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    // Sent to every other member, to all but the victim, to one member.
    for (int recipients : {kHonest, kHonest - 1, 1}) {
      SCOPED_TRACE(testing::Message() << "seed " << seed << ", " << recipients
                                      << " recipients");
      SimSwarm swarm(seed, SimNetwork::Options(), options);
      for (int i = 0; i <= kHonest; ++i) swarm.AddNode({static_cast<uint32_t>(i % 3)});
      swarm.StartAll(0);
      ASSERT_NE(swarm.RunUntil([&] { return swarm.Converged(); }, absl::Seconds(10)),
                absl::InfiniteDuration());
      swarm.Run(absl::Milliseconds(37) * static_cast<double>(seed));  // vary the phase
      const int mallory = kHonest;
      const int victim = static_cast<int>(seed % kHonest);
      const uint64_t before =
          swarm.node(mallory).GetView().Find(swarm.id(victim))->incarnation;
      proto::PingRequest suspicion;
      suspicion.set_protocol_version(proto::kProtocolVersion);
      suspicion.set_swarm_id(kUnitSwarm);
      suspicion.set_from(swarm.id(mallory).Bytes());
      suspicion.set_seq(1'000'000);
      proto::MembershipUpdate* u = suspicion.mutable_gossip()->add_updates();
      u->set_node_id(swarm.id(victim).Bytes());
      u->set_state(proto::MEMBER_STATE_SUSPECT);
      u->set_incarnation(before);
      ASSERT_TRUE(SignOpinion(swarm.identity(mallory), kUnitSwarm, u).ok());
      // The worst moment: just after the first recipient's probe tick.
      const int first = (victim + 1) % kHonest;
      const uint64_t probes = swarm.node(first).stats().probes;
      swarm.RunUntil([&] { return swarm.node(first).stats().probes != probes; },
                     absl::Seconds(2), absl::Milliseconds(1));
      for (int k = 1; k <= recipients; ++k) {
        const int i = (victim + k) % kHonest;  // the victim last
        swarm.node(i).HandlePing({swarm.address(mallory), swarm.id(mallory)}, suspicion,
                                 [](absl::StatusOr<proto::Ack>) {});
      }
      EXPECT_EQ(swarm.node(first).GetView().Find(swarm.id(victim))->state,
                proto::MEMBER_STATE_SUSPECT);
      const absl::Duration alive = swarm.RunUntil(
          [&] { return swarm.AllSee(victim, proto::MEMBER_STATE_ALIVE); }, absl::Seconds(5),
          absl::Milliseconds(1));
      std::cout << "seed " << seed << ", " << recipients << " recipients: ALIVE everywhere after "
                << alive << std::endl;
      EXPECT_LE(alive, options.probe_interval);
      worst_alive = std::max(worst_alive, alive);
      for (int i = 0; i < kHonest; ++i) {
        EXPECT_GT(swarm.node(i).GetView().Find(swarm.id(victim))->incarnation, before);
      }
      // Real failure detection is as before.
      const int crashed = (victim + 1) % kHonest;
      swarm.Kill(crashed);
      const absl::Duration dead = swarm.RunUntil(
          [&] { return swarm.AllSee(crashed, proto::MEMBER_STATE_DEAD); }, absl::Seconds(10));
      EXPECT_LE(dead, absl::Seconds(3));
      worst_dead = std::max(worst_dead, dead);
    }
  }
  std::cout << "FIGURE forged_suspicion_alive_everywhere_ms_worst="
            << absl::ToDoubleMilliseconds(worst_alive) << std::endl;
  std::cout << "FIGURE crash_dead_everywhere_after_forged_suspicion_s_worst="
            << absl::ToDoubleSeconds(worst_dead) << std::endl;
}

}  // namespace
}  // namespace skipswarm::membership
