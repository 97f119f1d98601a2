#include "node/daemon/gossip/newcomer_ledger.h"

#include <string>

#include "gtest/gtest.h"

namespace skipswarm::node {
namespace {

const common::NodeId kSelf = common::NodeId::ForName("self");
const common::NodeId kPeer = common::NodeId::ForName("peer");
const common::NodeId kLiar = common::NodeId::ForName("liar");

using Digests = std::vector<std::pair<common::NodeId, uint64_t>>;

TEST(NewcomerLedgerTest, VouchesAfterTheProbationOfMatchingDigestsOnly) {
  NewcomerLedger ledger(kSelf, 3);
  EXPECT_FALSE(ledger.Observe(1, Digests{{kSelf, 7}, {kPeer, 7}, {kLiar, 9}}, 7));
  EXPECT_FALSE(ledger.Observe(2, Digests{{kSelf, 8}, {kPeer, 8}, {kLiar, 8}}, 8));
  // Third matching iteration in a row: the peer qualifies; the liar matched
  // only from iteration 2.
  EXPECT_TRUE(ledger.Observe(3, Digests{{kSelf, 5}, {kPeer, 5}, {kLiar, 5}}, 5));
  EXPECT_EQ(ledger.Vouched(), std::vector<common::NodeId>{kPeer});
  EXPECT_TRUE(ledger.Observe(4, Digests{{kSelf, 6}, {kPeer, 6}, {kLiar, 6}}, 6));
  EXPECT_EQ(ledger.Vouched().size(), 2u);
}

TEST(NewcomerLedgerTest, OneMismatchWithdrawsTheVouchAndRestartsTheCount) {
  NewcomerLedger ledger(kSelf, 2);
  ledger.Observe(10, Digests{{kPeer, 1}}, 1);
  EXPECT_TRUE(ledger.Observe(11, Digests{{kPeer, 2}}, 2));
  EXPECT_TRUE(ledger.Observe(12, Digests{{kPeer, 4}}, 3));  // diverged
  EXPECT_TRUE(ledger.Vouched().empty());
  EXPECT_FALSE(ledger.Observe(13, Digests{{kPeer, 5}}, 5));
  EXPECT_TRUE(ledger.Observe(14, Digests{{kPeer, 6}}, 6));
}

// Note [Vouch withdrawal]: a mismatch our output checks recorded ends the
// run of a peer we vouched for, as a digest mismatch would; matching digests
// alone earn the vouch again, after a whole probation.
TEST(NewcomerLedgerTest, AnOutputMismatchWithdrawsOurVouchUntilAWholeNewProbation) {
  NewcomerLedger ledger(kSelf, 3);
  for (uint64_t it = 1; it <= 3; ++it) ledger.Observe(it, Digests{{kPeer, it}, {kLiar, it}}, it);
  ASSERT_EQ(ledger.Vouched().size(), 2u);
  EXPECT_TRUE(ledger.Withdraw(kLiar));
  EXPECT_EQ(ledger.Vouched(), std::vector<common::NodeId>{kPeer});  // the other vouch stays
  EXPECT_FALSE(ledger.Withdraw(kLiar));                              // nothing left to take
  EXPECT_FALSE(ledger.Withdraw(common::NodeId::ForName("stranger")));
  // Its digests still match ours: the vouch comes back after 3 more
  // iterations, not at the next comparison.
  EXPECT_FALSE(ledger.Observe(4, Digests{{kPeer, 4}, {kLiar, 4}}, 4));
  EXPECT_FALSE(ledger.Observe(5, Digests{{kPeer, 5}, {kLiar, 5}}, 5));
  EXPECT_EQ(ledger.Vouched(), std::vector<common::NodeId>{kPeer});
  EXPECT_TRUE(ledger.Observe(6, Digests{{kPeer, 6}, {kLiar, 6}}, 6));
  EXPECT_EQ(ledger.Vouched().size(), 2u);
}

// Outer steps compare every H iterations: the run counts iterations, and
// an absence (a round without the peer) neither adds nor breaks it.
TEST(NewcomerLedgerTest, RunsCountIterationsAcrossSparseComparisons) {
  NewcomerLedger ledger(kSelf, 16);
  EXPECT_FALSE(ledger.Observe(8, Digests{{kPeer, 1}}, 1));
  EXPECT_FALSE(ledger.Observe(16, Digests{{kSelf, 2}}, 2));
  EXPECT_TRUE(ledger.Observe(24, Digests{{kPeer, 3}}, 3));
}

TEST(NewcomerLedgerTest, ManyIdentitiesCostBoundedMemoryAndVouches) {
  NewcomerLedger ledger(kSelf, 1);
  Digests burst;
  for (int i = 0; i < 3000; ++i) {
    burst.emplace_back(common::NodeId::ForName("sybil" + std::to_string(i)), 1);
  }
  ledger.Observe(1, burst, 1);
  EXPECT_EQ(ledger.Vouched().size(), NewcomerLedger::kMaxVouches);
}

}  // namespace
}  // namespace skipswarm::node
