#include "node/daemon/gossip/orphan_restore.h"

#include "gtest/gtest.h"

namespace skipswarm::node {
namespace {

StateSource Holder(const std::string& name) {
  return StateSource(name + ":1", common::NodeId::ForName(name));
}

TEST(OrphanRestorePlanTest, TheNewestPeerCopyWinsOverAnOlderOwnState) {
  OrphanRestorePlan plan({2});
  plan.AddOwn(2, 4);
  plan.AddHeld(Holder("p"), {{2, 8}, {2, 12}});
  plan.AddHeld(Holder("q"), {{2, 12}, {1, 16}});
  const OrphanRestore& r = plan.stages().at(2);
  EXPECT_FALSE(r.own);
  EXPECT_EQ(r.iteration, 12u);
  ASSERT_EQ(r.holders.size(), 2u);
  EXPECT_EQ(r.holders[0].address, "p:1");
  EXPECT_EQ(r.holders[1].address, "q:1");
  EXPECT_FALSE(plan.Missing().has_value());
  EXPECT_EQ(plan.Newest(), 12u);
  EXPECT_EQ(plan.stages().count(1), 0u);  // not orphaned
}

// Note [Newest state wins]: our own newer state is kept, whichever order
// the answers come in.
TEST(OrphanRestorePlanTest, OwnNewerStateIsKeptAndNeverGoesBackToACopy) {
  for (bool own_first : {true, false}) {
    OrphanRestorePlan plan({2});
    if (own_first) plan.AddOwn(2, 14);
    plan.AddHeld(Holder("p"), {{2, 8}, {2, 12}});
    if (!own_first) plan.AddOwn(2, 14);
    const OrphanRestore& r = plan.stages().at(2);
    EXPECT_TRUE(r.own) << own_first;
    EXPECT_EQ(r.iteration, 14u) << own_first;
    EXPECT_TRUE(r.holders.empty()) << own_first;
    EXPECT_EQ(plan.Newest(), 14u);
  }
}

TEST(OrphanRestorePlanTest, ATieKeepsOurOwnState) {
  OrphanRestorePlan plan({2});
  plan.AddHeld(Holder("p"), {{2, 12}});
  plan.AddOwn(2, 12);
  plan.AddHeld(Holder("q"), {{2, 12}});
  EXPECT_TRUE(plan.stages().at(2).own);
  EXPECT_TRUE(plan.stages().at(2).holders.empty());
}

// A compute at step 0 (a joiner's fresh parameters, a restart without its
// disk) is no state of the stage.
TEST(OrphanRestorePlanTest, AFreshComputeIsNoStateAndACopyAtZeroStillCounts) {
  OrphanRestorePlan plan({1, 2});
  plan.AddOwn(1, 0);
  plan.AddOwn(2, 0);
  EXPECT_EQ(plan.Missing(), 1);
  plan.AddHeld(Holder("p"), {{1, 0}});
  EXPECT_EQ(plan.Missing(), 2);
  EXPECT_FALSE(plan.stages().at(1).own);
  plan.AddOwn(2, 3);
  EXPECT_FALSE(plan.Missing().has_value());
  EXPECT_TRUE(plan.stages().at(2).own);
}

TEST(OrphanRestorePlanTest, AHolderListingACopyTwiceIsAskedOnce) {
  OrphanRestorePlan plan({2});
  plan.AddHeld(Holder("p"), {{2, 12}, {2, 12}});
  EXPECT_EQ(plan.stages().at(2).holders.size(), 1u);
}

}  // namespace
}  // namespace skipswarm::node
