#include "node/train/gossiped_bans.h"

#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace skipswarm::node {
namespace {

using common::NodeId;

NodeId Id(const char* name) { return NodeId::ForName(name); }

// The mixed swarm of node/train/README.md in small: a data node d0 (stage
// 0), an SDP worker w0 (every stage) and pipeline replicas a, b, c of
// stages 1 and 2.
std::vector<BanReport> Swarm() {
  return {
      {Id("d0"), {0}, {}},
      {Id("w0"), {0, 1, 2}, {}},
      {Id("a"), {1}, {}},
      {Id("b"), {1}, {}},
      {Id("c"), {2}, {}},
  };
}

void Publish(std::vector<BanReport>& swarm, const char* reporter, const char* accused) {
  for (BanReport& m : swarm) {
    if (m.member == Id(reporter)) m.bans.push_back(Id(accused));
  }
}

TEST(QuorumBansTest, OneReporterIsNotEnough) {
  std::vector<BanReport> swarm = Swarm();
  Publish(swarm, "a", "w0");
  EXPECT_TRUE(QuorumBans(Id("d0"), {}, swarm).empty());
}

TEST(QuorumBansTest, AQuorumOfPeersIsAdopted) {
  std::vector<BanReport> swarm = Swarm();
  Publish(swarm, "a", "w0");
  Publish(swarm, "b", "w0");
  Publish(swarm, "c", "w0");
  const auto bans = QuorumBans(Id("d0"), {}, swarm);
  ASSERT_EQ(bans.size(), 1u);
  const AdoptedBan& ban = bans.at(Id("w0"));
  // d0, a, b, c share a stage with w0: 3 of 4.
  EXPECT_EQ(ban.eligible, 4u);
  EXPECT_EQ(std::set<NodeId>(ban.reporters.begin(), ban.reporters.end()),
            (std::set<NodeId>{Id("a"), Id("b"), Id("c")}));
}

TEST(QuorumBansTest, HalfIsNotAQuorum) {
  std::vector<BanReport> swarm = Swarm();
  Publish(swarm, "a", "w0");
  Publish(swarm, "b", "w0");  // 2 of 4 eligible
  EXPECT_TRUE(QuorumBans(Id("d0"), {}, swarm).empty());
}

TEST(QuorumBansTest, ReportersNotSharingAStageDoNotCount) {
  std::vector<BanReport> swarm = Swarm();
  swarm.push_back({Id("x"), {3}, {}});
  swarm.push_back({Id("y"), {3}, {}});
  // c hosts stage 2 only: x and y (stage 3) never saw c's parts.
  Publish(swarm, "x", "c");
  Publish(swarm, "y", "c");
  EXPECT_TRUE(QuorumBans(Id("d0"), {}, swarm).empty());
  // With w0 (which shares stage 2) they still are 1 of 1 eligible plus
  // nobody else: w0 alone is one word.
  Publish(swarm, "w0", "c");
  EXPECT_TRUE(QuorumBans(Id("d0"), {}, swarm).empty());
}

TEST(QuorumBansTest, RepeatsAndOverLongListsAreOneVoiceOrNone) {
  std::vector<BanReport> swarm = Swarm();
  Publish(swarm, "a", "w0");
  Publish(swarm, "a", "w0");
  swarm.push_back(swarm[2]);  // a listed twice
  EXPECT_TRUE(QuorumBans(Id("d0"), {}, swarm).empty());
  // b and c publish too, but b's list is over the bound: 2 of 4.
  Publish(swarm, "c", "w0");
  for (size_t i = 0; i < kMaxPublishedBans; ++i) Publish(swarm, "b", "d0");
  Publish(swarm, "b", "w0");
  EXPECT_TRUE(QuorumBans(Id("d0"), {}, swarm).empty());
}

TEST(QuorumBansTest, NeverSelfNorAnOwnBanNorAReporterBannedHere) {
  std::vector<BanReport> swarm = Swarm();
  Publish(swarm, "a", "d0");
  Publish(swarm, "b", "d0");
  Publish(swarm, "w0", "d0");
  EXPECT_TRUE(QuorumBans(Id("d0"), {}, swarm).empty());  // d0 is self
  Publish(swarm, "a", "w0");
  Publish(swarm, "b", "w0");
  Publish(swarm, "c", "w0");
  EXPECT_TRUE(QuorumBans(Id("d0"), {Id("w0")}, swarm).empty());  // banned here already
  // c is banned here: a and b are 2 of 4, no quorum.
  EXPECT_TRUE(QuorumBans(Id("d0"), {Id("c")}, swarm).empty());
}

TEST(QuorumBansTest, NewcomersOnProbationCountOnlyAsEligible) {
  std::vector<BanReport> swarm = Swarm();
  Publish(swarm, "a", "w0");
  Publish(swarm, "b", "w0");
  Publish(swarm, "c", "w0");
  for (BanReport& m : swarm) m.trusted = m.member != Id("c");
  EXPECT_TRUE(QuorumBans(Id("d0"), {}, swarm).empty()) << "a and b are 2 of 4";
  for (BanReport& m : swarm) m.trusted = true;
  EXPECT_EQ(QuorumBans(Id("d0"), {}, swarm).size(), 1u);
}

TEST(QuorumBansTest, OnlyMembersThatShareAStageWithTheAccusedAdopt) {
  std::vector<BanReport> swarm = Swarm();
  Publish(swarm, "a", "w0");
  Publish(swarm, "b", "w0");
  Publish(swarm, "c", "w0");
  swarm.push_back({Id("z"), {3}, {}});
  EXPECT_EQ(QuorumBans(Id("d0"), {}, swarm).size(), 1u);
  EXPECT_TRUE(QuorumBans(Id("z"), {}, swarm).empty()) << "z never averages w0's parts";
}

TEST(QuorumBansTest, AnAccusedThatIsNotALiveMemberIsNotAdopted) {
  std::vector<BanReport> swarm = Swarm();
  Publish(swarm, "a", "gone");
  Publish(swarm, "b", "gone");
  Publish(swarm, "c", "gone");
  EXPECT_TRUE(QuorumBans(Id("d0"), {}, swarm).empty());
}

TEST(GossipedBansTest, AdoptedOnceAndLiftedWhenReportersLeave) {
  std::vector<BanReport> swarm = Swarm();
  Publish(swarm, "a", "w0");
  Publish(swarm, "b", "w0");
  Publish(swarm, "c", "w0");
  GossipedBans bans;
  GossipedBans::Change change = bans.Update(Id("d0"), {}, swarm);
  EXPECT_EQ(change.adopted, std::vector<NodeId>{Id("w0")});
  EXPECT_TRUE(change.lifted.empty());
  change = bans.Update(Id("d0"), {}, swarm);  // unchanged: nothing new
  EXPECT_TRUE(change.adopted.empty());
  EXPECT_TRUE(change.lifted.empty());
  EXPECT_EQ(bans.adopted().count(Id("w0")), 1u);
  // c leaves: a and b are 2 of 3 eligible (d0, a, b): still held.
  swarm.erase(swarm.begin() + 4);
  change = bans.Update(Id("d0"), {}, swarm);
  EXPECT_TRUE(change.lifted.empty());
  EXPECT_EQ(bans.adopted().at(Id("w0")).eligible, 3u);
  // b leaves too: a alone, lifted.
  swarm.erase(swarm.begin() + 3);
  change = bans.Update(Id("d0"), {}, swarm);
  EXPECT_EQ(change.lifted, std::vector<NodeId>{Id("w0")});
  EXPECT_TRUE(bans.adopted().empty());
}

TEST(GossipedBansTest, ALocalBanTakesOverWithoutALift) {
  std::vector<BanReport> swarm = Swarm();
  Publish(swarm, "a", "w0");
  Publish(swarm, "b", "w0");
  Publish(swarm, "c", "w0");
  GossipedBans bans;
  bans.Update(Id("d0"), {}, swarm);
  const GossipedBans::Change change = bans.Update(Id("d0"), {Id("w0")}, swarm);
  EXPECT_TRUE(change.lifted.empty());
  EXPECT_TRUE(bans.adopted().empty());
}

// Note [Verify bans]: the hops after stage 1 are stage 2's host c and, for
// skip routes, the data node d0; neither shares a stage with a newcomer n
// of stage 1, yet their two verdicts reach n's group.
TEST(QuorumBansTest, TwoTrustedCatchersBanANewcomerForItsGroup) {
  std::vector<BanReport> swarm = Swarm();
  swarm.push_back({Id("n"), {1}, {}, /*trusted=*/false});
  Publish(swarm, "c", "n");
  EXPECT_TRUE(QuorumBans(Id("a"), {}, swarm).empty());  // one catcher: nobody
  Publish(swarm, "d0", "n");
  const auto bans = QuorumBans(Id("a"), {}, swarm);
  ASSERT_EQ(bans.size(), 1u);
  EXPECT_TRUE(bans.at(Id("n")).verify_quorum);
  EXPECT_EQ(bans.at(Id("n")).reporters.size(), 2u);
  // A trusted member named by the same two, which share no stage with it
  // (Note [Trusted verify bans]): b leaves its group's averaging too; a and
  // w0 still host stage 1.
  Publish(swarm, "c", "b");
  Publish(swarm, "d0", "b");
  ASSERT_EQ(QuorumBans(Id("a"), {}, swarm).count(Id("b")), 1u);
  EXPECT_TRUE(QuorumBans(Id("a"), {}, swarm).at(Id("b")).verify_quorum);
  // Not w0, a stage peer of both: their bans of it may be group bans, which
  // need the stage-peer majority (2 of its 4 peers is none).
  Publish(swarm, "c", "w0");
  Publish(swarm, "d0", "w0");
  EXPECT_EQ(QuorumBans(Id("a"), {}, swarm).count(Id("w0")), 0u);
  // A catcher this member bans itself does not count.
  EXPECT_TRUE(QuorumBans(Id("a"), {Id("c")}, swarm).empty());
}

}  // namespace
}  // namespace skipswarm::node
