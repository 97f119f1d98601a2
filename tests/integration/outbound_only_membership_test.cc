// Outbound-only (NATed) members on the simulated network, several at once,
// as in the netns home layout (tests/netns/README.md): no false verdicts
// between them, none about a starved one, and LEFT (not DEAD) when the
// dialable members leave (Note [Outbound-only members] in
// membership/membership_impl.h).
#include <set>

#include "gtest/gtest.h"
#include "membership/membership.h"
#include "membership/record.h"
#include "proto/version.h"
#include "sim/sim_swarm.h"
#include "tests/integration/unit_membership_options.h"

namespace skipswarm::membership {
namespace {

using sim::SimNetwork;
using sim::SimSwarm;

// `publics` dialable nodes (0..publics-1) and `homes` outbound-only ones
// after them: each advertises an address where nothing listens (a NAT
// without forwarding) and says so in its record. Returns once every view
// holds the home nodes' outbound-only records (within `limit`).
void BuildHomeLayout(SimSwarm& swarm, int publics, int homes,
                     absl::Duration limit = absl::Seconds(10)) {
  for (int i = 0; i < publics + homes; ++i) swarm.AddNode({static_cast<uint32_t>(i % 3)});
  swarm.StartAll(0);
  ASSERT_NE(swarm.RunUntil([&] { return swarm.Converged(); }, absl::Seconds(10)),
            absl::InfiniteDuration());
  for (int h = publics; h < publics + homes; ++h) {
    ASSERT_TRUE(swarm.node(h)
                    .UpdateLocalRecord([&](proto::NodeRecord* r) {
                      r->set_addresses(0, "behind-nat-" + std::to_string(h) + ":7000");
                      r->set_outbound_only(true);
                    })
                    .ok());
  }
  ASSERT_NE(swarm.RunUntil(
                [&] {
                  for (int i = 0; i < swarm.size(); ++i) {
                    const View view = swarm.node(i).GetView();
                    for (int h = publics; h < publics + homes; ++h) {
                      const MemberInfo* m = view.Find(swarm.id(h));
                      if (m == nullptr || !m->outbound_only) return false;
                    }
                  }
                  return true;
                },
                limit),
            absl::InfiniteDuration());
}

// SUSPECT or DEAD transitions about any of `subjects` seen since
// transitions()[from].
int VerdictsAbout(const SimSwarm& swarm, size_t from, const std::set<int>& subjects,
                  proto::MemberState state) {
  int n = 0;
  for (size_t i = from; i < swarm.transitions().size(); ++i) {
    const SimSwarm::Transition& t = swarm.transitions()[i];
    if (subjects.count(t.subject) > 0 && t.observer != t.subject && t.state == state) ++n;
  }
  return n;
}

TEST(OutboundOnlyMembersTest, TwoOutboundOnlyMembersNeverSuspectEachOther) {
  // Neither can dial the other, so neither hears the other first-hand;
  // silence between them is no sign of death.
  SimSwarm swarm(17, SimNetwork::Options(), UnitMembershipOptions());
  BuildHomeLayout(swarm, /*publics=*/4, /*homes=*/2);
  const size_t before = swarm.transitions().size();
  swarm.Run(absl::Minutes(2));
  EXPECT_EQ(VerdictsAbout(swarm, before, {4, 5}, proto::MEMBER_STATE_SUSPECT), 0);
  EXPECT_EQ(VerdictsAbout(swarm, before, {4, 5}, proto::MEMBER_STATE_DEAD), 0);
  EXPECT_TRUE(swarm.Converged());
}

// Raises node `h`'s local health score to its maximum the way a refuted
// suspicion does (each refutation counts +1; under load late timers do the
// same): `times` signed suspicions from node 0 about its current
// incarnation, each refuted at once.
void WorsenHealth(SimSwarm& swarm, int h, int times) {
  for (int k = 0; k < times; ++k) {
    const View view = swarm.node(h).GetView();
    const MemberInfo* self = view.Find(swarm.id(h));
    ASSERT_NE(self, nullptr);
    proto::PingRequest req;
    req.set_protocol_version(proto::kProtocolVersion);
    req.set_swarm_id(kUnitSwarm);
    req.set_from(swarm.id(0).Bytes());
    proto::MembershipUpdate* u = req.mutable_gossip()->add_updates();
    u->set_node_id(swarm.id(h).Bytes());
    u->set_state(proto::MEMBER_STATE_SUSPECT);
    u->set_incarnation(self->incarnation);
    ASSERT_TRUE(SignOpinion(swarm.identity(0), kUnitSwarm, u).ok());
    swarm.node(h).HandlePing({swarm.address(0), swarm.id(0)}, req,
                             [](absl::StatusOr<proto::Ack>) {});
  }
}

TEST(OutboundOnlyMembersTest, AnOutboundOnlyMemberInPoorHealthIsStillHeardInTime) {
  // Its probe rounds slow down with its health score (to 9x at the
  // maximum); its requests are its only sign of life and must still reach
  // every member within the silence limit.
  MembershipOptions o = UnitMembershipOptions();
  SimSwarm swarm(23, SimNetwork::Options(), o);
  BuildHomeLayout(swarm, /*publics=*/4, /*homes=*/1);
  const size_t before = swarm.transitions().size();
  for (int episode = 0; episode < 6; ++episode) {
    WorsenHealth(swarm, 4, o.max_health_score);
    EXPECT_EQ(swarm.node(4).stats().health_score, o.max_health_score);
    swarm.Run(absl::Seconds(20));
  }
  EXPECT_EQ(VerdictsAbout(swarm, before, {4}, proto::MEMBER_STATE_SUSPECT), 0);
  EXPECT_EQ(VerdictsAbout(swarm, before, {4}, proto::MEMBER_STATE_DEAD), 0);
}

TEST(OutboundOnlyMembersTest, HearsayIsCheckedAgainstFresherRecordsBeforeItKills) {
  // Node 5 re-signed its record while node 4 (outbound-only: it hears news
  // only in replies) heard nothing; gossip's few retransmissions of it are
  // spent and anti-entropy is far off. Node 4 is then told,
  // by a member, of a suspicion about node 5's old record: its timer must
  // not convict before it has pulled the fresher record.
  MembershipOptions o = UnitMembershipOptions();
  o.push_pull_interval = absl::Seconds(30);
  SimSwarm swarm(41, SimNetwork::Options(), o);
  BuildHomeLayout(swarm, /*publics=*/4, /*homes=*/2, absl::Seconds(60));
  swarm.Run(absl::Seconds(3));
  const auto incarnation_at_4 = [&] {
    const View view = swarm.node(4).GetView();
    const MemberInfo* m = view.Find(swarm.id(5));
    return m == nullptr ? 0 : m->incarnation;
  };
  const uint64_t old_incarnation = incarnation_at_4();
  const std::string deaf = swarm.address(4);
  swarm.net().SetLinkFilter([deaf](const std::string&, const std::string& to) { return to != deaf; });
  ASSERT_TRUE(swarm.node(5).UpdateLocalRecord([](proto::NodeRecord* r) { r->set_iteration(7); }).ok());
  swarm.Run(absl::Seconds(2));
  swarm.net().SetLinkFilter(nullptr);
  ASSERT_EQ(incarnation_at_4(), old_incarnation) << "node 4 heard the new record: no test";
  const size_t before = swarm.transitions().size();
  proto::PingRequest req;
  req.set_protocol_version(proto::kProtocolVersion);
  req.set_swarm_id(kUnitSwarm);
  req.set_from(swarm.id(0).Bytes());
  proto::MembershipUpdate* u = req.mutable_gossip()->add_updates();
  u->set_node_id(swarm.id(5).Bytes());
  u->set_state(proto::MEMBER_STATE_SUSPECT);
  u->set_incarnation(old_incarnation);
  ASSERT_TRUE(SignOpinion(swarm.identity(0), kUnitSwarm, u).ok());
  swarm.node(4).HandlePing({swarm.address(0), swarm.id(0)}, req, [](absl::StatusOr<proto::Ack>) {});
  swarm.Run(absl::Seconds(8));  // past the longest suspicion (4 s)
  int dead_at_4 = 0;
  for (size_t i = before; i < swarm.transitions().size(); ++i) {
    const SimSwarm::Transition& t = swarm.transitions()[i];
    if (t.observer == 4 && t.subject == 5 && t.state == proto::MEMBER_STATE_DEAD) ++dead_at_4;
  }
  EXPECT_EQ(dead_at_4, 0);
  EXPECT_GT(incarnation_at_4(), old_incarnation);
}

// The netns home layout's join window, on a loaded machine: 4 dialable
// members train; two home nodes join from behind their NATs. Until their
// reachability checks settle (`window`) their records name an address
// nobody can dial and do not yet say outbound_only, so every probe of them
// fails and they are suspected; they are alive and talk to everybody (their
// requests and the replies to them get through). Every member handles its
// requests `inbound_delay` late (a starved process). Returns the DEAD
// verdicts about the home nodes from their join on.
int JoinWindowDeadVerdicts(uint64_t seed, absl::Duration window, absl::Duration inbound_delay) {
  MembershipOptions o = UnitMembershipOptions();
  SimNetwork::Options net;
  net.jitter = absl::Milliseconds(20);
  SimSwarm swarm(seed, net, o);
  for (int i = 0; i < 4; ++i) swarm.AddNode({static_cast<uint32_t>(i % 3)});
  swarm.StartAll(0);
  EXPECT_NE(swarm.RunUntil([&] { return swarm.Converged(); }, absl::Seconds(10)),
            absl::InfiniteDuration());
  for (int i = 0; i < 4; ++i) swarm.SetInboundDelay(i, inbound_delay);
  const size_t before = swarm.transitions().size();
  for (int h : {4, 5}) {
    swarm.AddNode({static_cast<uint32_t>(h - 3)});
    EXPECT_TRUE(swarm.node(h)
                    .UpdateLocalRecord([&](proto::NodeRecord* r) {
                      r->set_addresses(0, "behind-nat-" + std::to_string(h) + ":7000");
                    })
                    .ok());
    swarm.StartAndJoin(h, {0});
  }
  swarm.Run(window);
  for (int h : {4, 5}) {
    EXPECT_TRUE(
        swarm.node(h).UpdateLocalRecord([](proto::NodeRecord* r) { r->set_outbound_only(true); }).ok());
  }
  swarm.Run(absl::Seconds(20));
  for (int i = 0; i < swarm.size(); ++i) {
    const View view = swarm.node(i).GetView();
    for (int h : {4, 5}) {
      const MemberInfo* m = view.Find(swarm.id(h));
      EXPECT_TRUE(m != nullptr && m->outbound_only && m->state == proto::MEMBER_STATE_ALIVE)
          << "seed " << seed << ": node " << i << " about home node " << h;
    }
  }
  return VerdictsAbout(swarm, before, {4, 5}, proto::MEMBER_STATE_DEAD);
}

TEST(OutboundOnlyMembersTest, HomeJoinersAreNotDeclaredDeadBeforeTheirReachabilityVerdict) {
  // They are suspected (their probes fail), but they talk to every member:
  // each must get its refutation to whoever suspects it, over its own
  // connections, before that member's timer runs out.
  for (const absl::Duration inbound_delay : {absl::ZeroDuration(), absl::Milliseconds(60)}) {
    int dead = 0;
    for (uint64_t seed = 1; seed <= 12; ++seed) {
      dead += JoinWindowDeadVerdicts(seed, absl::Seconds(5), inbound_delay);
    }
    EXPECT_EQ(dead, 0) << "handlers " << inbound_delay << " late";
  }
}

TEST(OutboundOnlyMembersTest, AnOutboundOnlyMemberGetsAChangedRecordInItsNextReplies) {
  // Node 5 re-signs its record while node 4 (outbound-only: it hears news
  // only in replies) asks nobody, so gossip's retransmissions of it are
  // spent elsewhere and anti-entropy is far off: the replies to node 4's
  // next requests must bring it (Note [Replies bring news]).
  MembershipOptions o = UnitMembershipOptions();
  o.push_pull_interval = absl::Seconds(30);
  SimSwarm swarm(43, SimNetwork::Options(), o);
  BuildHomeLayout(swarm, /*publics=*/4, /*homes=*/2, absl::Seconds(60));
  swarm.Run(absl::Seconds(3));
  const auto incarnation_at_4 = [&] {
    const View view = swarm.node(4).GetView();
    const MemberInfo* m = view.Find(swarm.id(5));
    return m == nullptr ? 0 : m->incarnation;
  };
  const uint64_t old_incarnation = incarnation_at_4();
  const std::string mute = swarm.address(4);
  swarm.net().SetLinkFilter([mute](const std::string& from, const std::string&) { return from != mute; });
  ASSERT_TRUE(swarm.node(5).UpdateLocalRecord([](proto::NodeRecord* r) { r->set_iteration(7); }).ok());
  swarm.Run(absl::Seconds(2));
  swarm.net().SetLinkFilter(nullptr);
  ASSERT_EQ(incarnation_at_4(), old_incarnation) << "node 4 heard the new record: no test";
  const absl::Duration t =
      swarm.RunUntil([&] { return incarnation_at_4() > old_incarnation; }, absl::Seconds(20));
  EXPECT_LE(t, absl::Seconds(1));
}

TEST(OutboundOnlyMembersTest, OutboundOnlyMembersSeeDialableOnesLeaveNotDie) {
  // The end of a run: every dialable member leaves at once and its process
  // exits once Leave is done. The outbound-only members, which nobody can
  // tell directly, must still hold them LEFT.
  SimSwarm swarm(29, SimNetwork::Options(), UnitMembershipOptions());
  BuildHomeLayout(swarm, /*publics=*/3, /*homes=*/2);
  const size_t before = swarm.transitions().size();
  int done = 0;
  for (int p = 0; p < 3; ++p) swarm.node(p).Leave([&done] { ++done; });
  ASSERT_NE(swarm.RunUntil([&] { return done == 3; }, absl::Seconds(10)),
            absl::InfiniteDuration());
  for (int p = 0; p < 3; ++p) swarm.Kill(p);
  swarm.Run(absl::Seconds(30));
  for (int h : {3, 4}) {
    const View view = swarm.node(h).GetView();
    for (int p = 0; p < 3; ++p) {
      const MemberInfo* m = view.Find(swarm.id(p));
      ASSERT_NE(m, nullptr);
      EXPECT_EQ(m->state, proto::MEMBER_STATE_LEFT) << "node " << h << " about node " << p;
    }
  }
  EXPECT_EQ(VerdictsAbout(swarm, before, {0, 1, 2}, proto::MEMBER_STATE_DEAD), 0);
}

TEST(OutboundOnlyMembersTest, ADialableMemberWithoutOutboundOnlyOnesLeavesAtOnce) {
  // The wait for outbound-only members to hear of the leave costs nothing
  // where there are none.
  SimSwarm swarm(31, SimNetwork::Options(), UnitMembershipOptions());
  for (int i = 0; i < 3; ++i) swarm.AddNode({static_cast<uint32_t>(i)});
  swarm.StartAll(0);
  ASSERT_NE(swarm.RunUntil([&] { return swarm.Converged(); }, absl::Seconds(10)),
            absl::InfiniteDuration());
  bool done = false;
  swarm.node(1).Leave([&done] { done = true; });
  const absl::Duration t = swarm.RunUntil([&] { return done; }, absl::Seconds(10));
  EXPECT_LT(t, absl::Milliseconds(200));
}

}  // namespace
}  // namespace skipswarm::membership
