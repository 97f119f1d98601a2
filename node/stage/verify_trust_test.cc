#include "node/stage/verify_trust.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace skipswarm::node {
namespace {

using common::NodeId;

TEST(VerifyTrustTest, AConsistentLiarIsCondemnedAtTheThirdMismatch) {
  VerifyTrust trust;
  const NodeId x = NodeId::ForName("x");
  EXPECT_FALSE(trust.Record(x, false));
  EXPECT_FALSE(trust.Record(x, false));
  EXPECT_FALSE(trust.Condemned(x));
  EXPECT_EQ(trust.generation(), 0u);
  EXPECT_TRUE(trust.Record(x, false));
  EXPECT_TRUE(trust.Condemned(x));
  EXPECT_FALSE(trust.Record(x, false));  // once
  EXPECT_EQ(trust.generation(), 1u);
  EXPECT_EQ(trust.condemned(), std::vector<NodeId>{x});
  EXPECT_EQ(trust.verdicts().at(x).mismatches, 4);
}

TEST(VerifyTrustTest, MatchesForgiveARareMismatchButNotAFrequentLiar) {
  VerifyTrust trust;
  const NodeId honest = NodeId::ForName("honest"), liar = NodeId::ForName("liar");
  // One false mismatch every 10 checks, for ever: strikes never reach 3.
  for (int i = 0; i < 1000; ++i) trust.Record(honest, i % 10 != 0);
  EXPECT_FALSE(trust.Condemned(honest));
  EXPECT_LE(trust.verdicts().at(honest).strikes, 1.0);
  // Lies on one micro-batch in three (p = 1/3 > 0.2): condemned.
  int checks = 0;
  while (!trust.Condemned(liar) && checks < 1000) trust.Record(liar, ++checks % 3 != 0);
  EXPECT_TRUE(trust.Condemned(liar));
  EXPECT_LT(checks, 100);
  EXPECT_EQ(trust.condemned(), std::vector<NodeId>{liar});
}

TEST(VerifyTrustTest, ZeroThresholdNeverCondemns) {
  VerifyTrust trust(VerifyTrustOptions{.exclude_at = 0});
  const NodeId x = NodeId::ForName("x");
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(trust.Record(x, false));
  EXPECT_FALSE(trust.Condemned(x));
}

// Note [Trusted disputes]: three trusted replicas, l lying from now on.
TEST(VerifyTrustTest, ATrustedLiarIsCondemnedByItsDisputesWithTwoPartners) {
  VerifyTrust trust;
  const NodeId a = NodeId::ForName("a"), b = NodeId::ForName("b"), l = NodeId::ForName("l");
  EXPECT_TRUE(trust.RecordPair(l, a, false).empty());
  EXPECT_TRUE(trust.RecordPair(a, l, false).empty());  // l's sketch of a's input: l vs a again
  EXPECT_TRUE(trust.RecordPair(a, b, true).empty());   // honest pairs agree
  EXPECT_TRUE(trust.RecordPair(l, b, false).empty());  // a dispute with a only, so far
  EXPECT_EQ(trust.RecordPair(b, l, false), std::vector<NodeId>{l});
  EXPECT_EQ(trust.condemned(), std::vector<NodeId>{l});
  // a and b each disputed with l only: never condemned, however long.
  for (int i = 0; i < 10; ++i) {
    EXPECT_TRUE(trust.RecordPair(a, l, false).empty());
    EXPECT_TRUE(trust.RecordPair(b, l, false).empty());
  }
  EXPECT_FALSE(trust.Condemned(a));
  EXPECT_FALSE(trust.Condemned(b));
}

// Note [Trusted disputes]: a false-input proof condemns at once, whatever
// the member's trust and strikes; a sketch mismatch keeps its rule.
TEST(VerifyTrustTest, AProofCondemnsATrustedMemberAtOnce) {
  VerifyTrust trust;
  const NodeId a = NodeId::ForName("a"), l = NodeId::ForName("l");
  EXPECT_TRUE(trust.RecordPair(l, a, false).empty());  // one dispute strike: nobody
  EXPECT_FALSE(trust.Condemned(l));
  const uint64_t before = trust.generation();
  EXPECT_TRUE(trust.Condemn(l));
  EXPECT_TRUE(trust.Condemned(l));
  EXPECT_GT(trust.generation(), before);
  EXPECT_FALSE(trust.Condemn(l));  // once
  EXPECT_EQ(trust.condemned(), std::vector<NodeId>{l});
  EXPECT_FALSE(trust.Condemned(a));  // its partner is not implicated
  EXPECT_EQ(trust.verdicts().at(l).mismatches, 3);
}

TEST(VerifyTrustTest, TwoTrustedReplicasAloneCondemnNobody) {
  VerifyTrust trust;
  const NodeId a = NodeId::ForName("a"), l = NodeId::ForName("l");
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(trust.RecordPair(a, l, false).empty());
  EXPECT_TRUE(trust.condemned().empty());
  // A rare honest mismatch is forgiven by the pair's matches.
  VerifyTrust honest;
  const NodeId b = NodeId::ForName("b"), c = NodeId::ForName("c");
  for (int i = 0; i < 1000; ++i) {
    honest.RecordPair(a, b, i % 10 != 0);
    honest.RecordPair(a, c, i % 10 != 5);
  }
  EXPECT_TRUE(honest.condemned().empty());
}

// Note [Vouch withdrawal] reads the members mismatches named: the checked
// newcomer, both members of a trusted pair; never a member that only matched.
TEST(VerifyTrustTest, TakeMismatchedNamesEveryMemberAMismatchImplicatedOnce) {
  VerifyTrust trust;
  const NodeId n = NodeId::ForName("n"), x = NodeId::ForName("x"), y = NodeId::ForName("y"),
               h = NodeId::ForName("h");
  trust.Record(h, true);
  trust.RecordPair(h, x, true);
  EXPECT_TRUE(trust.TakeMismatched().empty());
  trust.Record(n, false);
  trust.Record(n, false);
  trust.RecordPair(x, y, false);
  std::vector<NodeId> want = {n, x, y};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(trust.TakeMismatched(), want);
  EXPECT_TRUE(trust.TakeMismatched().empty());  // taken
}

TEST(VerifiedRoutingViewTest, RoutesAroundTheCondemnedButKeepsThemAlive) {
  const NodeId a = NodeId::ForName("a"), b = NodeId::ForName("b"), d = NodeId::ForName("d");
  StaticSwarmView inner({{d, {0}, 4}, {a, {1}, 4}, {b, {1}, 4}});
  VerifyTrust trust(VerifyTrustOptions{.exclude_at = 1});
  VerifiedRoutingView view(&inner, &trust, d);
  const uint64_t v0 = view.version();
  EXPECT_EQ(view.Replicas(1).size(), 2u);
  trust.Record(b, false);
  EXPECT_GT(view.version(), v0);
  EXPECT_EQ(view.Replicas(1), std::vector<NodeId>{a});
  for (const PeerInfo& p : view.Members()) EXPECT_NE(p.id, b);
  EXPECT_EQ(view.Members().size(), 2u);
  EXPECT_TRUE(view.IsAlive(b));  // hops already routed through it go on
  view.MarkDead(a);
  EXPECT_FALSE(inner.IsAlive(a));
}

// Note [Confirmed stopping] (node/train/data_node_driver.h): the daemons'
// data node drivers read stopping records and their incarnations through
// this view; a record of the inner view, a condemned member's included,
// reaches them unchanged.
TEST(VerifiedRoutingViewTest, PassesOnTheInnerViewsStoppingRecords) {
  const NodeId a = NodeId::ForName("a"), b = NodeId::ForName("b"), d = NodeId::ForName("d");
  StaticSwarmView inner({{d, {0}, 4}, {a, {1}, 4}, {b, {1}, 4}});
  VerifyTrust trust(VerifyTrustOptions{.exclude_at = 1});
  VerifiedRoutingView view(&inner, &trust, d);
  EXPECT_EQ(view.StopAfter(b), std::nullopt);
  EXPECT_EQ(view.Incarnation(b), std::optional<uint64_t>(1));
  inner.SetStopping(b, 14);
  EXPECT_EQ(view.StopAfter(b), std::optional<uint64_t>(14));
  EXPECT_EQ(view.Incarnation(b), std::optional<uint64_t>(2));
  EXPECT_EQ(view.StopAfter(a), std::nullopt);
  trust.Record(b, false);  // condemned: out of the routes, its record stays
  EXPECT_EQ(view.StopAfter(b), std::optional<uint64_t>(14));
  EXPECT_EQ(view.Incarnation(b), std::optional<uint64_t>(2));
  inner.NewRecord(b);
  EXPECT_EQ(view.Incarnation(b), std::optional<uint64_t>(3));
  EXPECT_EQ(view.Incarnation(NodeId::ForName("stranger")), std::nullopt);
}

// Note [Verify bans]: a 3-stage pipeline's swarm: a data node d, a trusted
// and a newcomer replica (t1, n1) of stage 1, trusted s2a and s2b of stage
// 2 (the hops after stage 1), a trusted t3 and a newcomer n3 of stage 3.
std::vector<PeerInfo> Live() {
  auto peer = [](const char* name, int stage, bool probation) {
    PeerInfo p;
    p.id = NodeId::ForName(name);
    p.stages = {stage};
    p.on_probation = probation;
    return p;
  };
  return {peer("d", 0, false),   peer("t1", 1, false),  peer("n1", 1, true),
          peer("s2a", 2, false), peer("s2b", 2, false), peer("t3", 3, false),
          peer("n3", 3, true)};
}

void Accuse(std::vector<PeerInfo>& live, const char* accuser, const char* accused) {
  for (PeerInfo& p : live) {
    if (p.id == NodeId::ForName(accuser)) p.bans.push_back(NodeId::ForName(accused));
  }
}

TEST(VerifyQuorumBansTest, ALoneAccuserBansNobody) {
  const NodeId d = NodeId::ForName("d"), n1 = NodeId::ForName("n1");
  std::vector<PeerInfo> live = Live();
  Accuse(live, "s2a", "n1");
  Accuse(live, "s2a", "n1");  // twice in one record: one voice
  EXPECT_TRUE(VerifyQuorumBans(d, live, {}).empty());
  // Newcomers' accusations count for nothing, however many.
  Accuse(live, "n3", "n1");
  EXPECT_TRUE(VerifyQuorumBans(d, live, {}).empty());
  // A second trusted accuser, from any stage: adopted.
  Accuse(live, "t3", "n1");
  const auto bans = VerifyQuorumBans(d, live, {});
  ASSERT_EQ(bans.size(), 1u);
  EXPECT_EQ(bans.at(n1).size(), 2u);
  // An accuser this node distrusts does not count.
  EXPECT_TRUE(VerifyQuorumBans(d, live, {NodeId::ForName("t3")}).empty());
  // A node never bans itself.
  EXPECT_TRUE(VerifyQuorumBans(n1, live, {}).empty());
}

// Note [Trusted verify bans]: a trusted member condemned by its disputes
// at two catchers of other stages leaves every member's routes, where
// another trusted host of its stage remains.
TEST(VerifyQuorumBansTest, ATrustedMemberTwoCatchersOfOtherStagesCondemnedIsBanned) {
  std::vector<PeerInfo> live = Live();
  PeerInfo t1b;
  t1b.id = NodeId::ForName("t1b");
  t1b.stages = {1};
  live.push_back(t1b);
  const NodeId t1 = NodeId::ForName("t1"), d = NodeId::ForName("d");
  Accuse(live, "s2a", "t1");
  EXPECT_TRUE(VerifyQuorumBans(d, live, {}).empty());  // one accuser: nobody
  Accuse(live, "s2b", "t1");
  auto bans = VerifyQuorumBans(d, live, {});
  ASSERT_EQ(bans.count(t1), 1u);
  EXPECT_EQ(bans.at(t1), (std::vector<NodeId>{std::min(NodeId::ForName("s2a"),
                                                       NodeId::ForName("s2b")),
                                              std::max(NodeId::ForName("s2a"),
                                                       NodeId::ForName("s2b"))}));
  // The same for t1b's own view, which shares t1's stage (it adopts; it
  // does not accuse).
  EXPECT_EQ(VerifyQuorumBans(t1b.id, live, {}).count(t1), 1u);
  // The data node's routes: stage 1 through t1b (and the newcomer beside it).
  StaticSwarmView inner(live);
  VerifyTrust trust;
  VerifiedRoutingView view(&inner, &trust, d);
  const std::vector<NodeId> replicas = view.Replicas(1);
  EXPECT_EQ(std::count(replicas.begin(), replicas.end(), t1), 0);
  EXPECT_EQ(std::count(replicas.begin(), replicas.end(), t1b.id), 1);
  EXPECT_TRUE(view.IsAlive(t1));  // hops already routed through it end as usual
  // An accuser this node distrusts does not count.
  EXPECT_TRUE(VerifyQuorumBans(d, live, {NodeId::ForName("s2b")}).empty());
}

TEST(VerifyQuorumBansTest, ATrustedMembersStagePeersAndItsStagesLastHostAreExempt) {
  std::vector<PeerInfo> live = Live();
  // t1 is stage 1's only trusted host (n1 is on probation): however many
  // accuse it, banning it would leave the stage without a route.
  for (const char* accuser : {"d", "s2a", "s2b", "t3"}) Accuse(live, accuser, "t1");
  EXPECT_TRUE(VerifyQuorumBans(NodeId::ForName("n3"), live, {}).empty());
  // s2a, named by its stage peer s2b and one other: the peer's ban may be a
  // group ban (Note [Group bans]), so one accuser counts.
  Accuse(live, "s2b", "s2a");
  Accuse(live, "t3", "s2a");
  EXPECT_TRUE(VerifyQuorumBans(NodeId::ForName("d"), live, {}).empty());
  // Nor one that is not a live member.
  for (const char* accuser : {"s2a", "s2b"}) Accuse(live, accuser, "gone");
  EXPECT_TRUE(VerifyQuorumBans(NodeId::ForName("d"), live, {}).empty());
}

// Note [Trusted verify bans]: a ban on a false-input proof is not kept by
// the last-host exemption, and the proven member is no "other host" for
// another trusted accused of its stage.
TEST(VerifyQuorumBansTest, AProvenLiarIsBannedEvenAsItsStagesLastTrustedHost) {
  std::vector<PeerInfo> live = Live();
  const NodeId d = NodeId::ForName("d"), t1 = NodeId::ForName("t1"),
               s2a = NodeId::ForName("s2a");
  Accuse(live, "s2a", "t1");
  // t1 is stage 1's only trusted host. A mismatch piece (not a proof) does
  // not hold for a trusted member, nor does the quorum keep it.
  EXPECT_TRUE(VerifyQuorumBans(d, live, {}, {{t1, EvidenceBan{s2a}}}).empty());
  for (const char* accuser : {"s2b", "t3"}) Accuse(live, accuser, "t1");
  EXPECT_TRUE(VerifyQuorumBans(d, live, {}).empty());
  // A proof: banned, by the catcher alone, stage 1 left to its newcomer.
  const EvidencedBans proven = {{t1, EvidenceBan{s2a, true}}};
  auto bans = VerifyQuorumBans(d, live, {}, proven);
  ASSERT_EQ(bans.count(t1), 1u);
  StaticSwarmView inner(live);
  VerifyTrust trust;
  EvidenceBans evidence;
  EXPECT_TRUE(evidence.Adopt(t1, s2a, /*proven=*/true));
  VerifiedRoutingView view(&inner, &trust, d, &evidence);
  EXPECT_EQ(view.Replicas(1), std::vector<NodeId>{NodeId::ForName("n1")});
  // A second trusted host t1b that the quorum accuses: with t1 proven,
  // t1b is stage 1's last trusted host, so the exemption keeps it.
  live = Live();
  PeerInfo t1b;
  t1b.id = NodeId::ForName("t1b");
  t1b.stages = {1};
  live.push_back(t1b);
  for (const char* accuser : {"s2a", "s2b"}) Accuse(live, accuser, "t1b");
  bans = VerifyQuorumBans(d, live, {}, proven);
  EXPECT_EQ(bans.count(t1), 1u);
  EXPECT_EQ(bans.count(t1b.id), 0u);
  // Without the proof t1 is t1b's other host: t1b goes, t1 stays.
  bans = VerifyQuorumBans(d, live, {});
  EXPECT_EQ(bans.count(t1), 0u);
  EXPECT_EQ(bans.count(t1b.id), 1u);
}

TEST(VerifiedRoutingViewTest, RoutesAroundANewcomerTwoTrustedMembersCondemned) {
  std::vector<PeerInfo> live = Live();
  Accuse(live, "s2a", "n1");
  const NodeId d = NodeId::ForName("d"), t1 = NodeId::ForName("t1"), n1 = NodeId::ForName("n1");
  {
    StaticSwarmView inner(live);
    VerifyTrust trust;
    VerifiedRoutingView view(&inner, &trust, d);
    EXPECT_EQ(view.Replicas(1), inner.Replicas(1));  // one accuser: still routed
  }
  Accuse(live, "s2b", "n1");
  StaticSwarmView inner(live);
  VerifyTrust trust;
  VerifiedRoutingView view(&inner, &trust, d);
  EXPECT_EQ(view.Replicas(1), std::vector<NodeId>{t1});
  for (const PeerInfo& p : view.Members()) EXPECT_NE(p.id, n1);
  // A dead accuser's word lapses.
  inner.MarkDead(NodeId::ForName("s2b"));
  EXPECT_EQ(view.Replicas(1).size(), 2u);
}

}  // namespace
}  // namespace skipswarm::node
