#include "node/train/resync_source.h"

#include <algorithm>
#include <set>
#include <string>

#include "gtest/gtest.h"

namespace skipswarm::node {
namespace {

using common::NodeId;

std::vector<NodeId> SortedIds(int n) {
  std::vector<NodeId> ids;
  for (int i = 0; i < n; ++i) ids.push_back(NodeId::ForName("m" + std::to_string(i)));
  std::sort(ids.begin(), ids.end());
  return ids;
}

TEST(ResyncSourceTest, TheMajorityWinsWhateverTheIds) {
  const std::vector<NodeId> ids = SortedIds(3);
  // The lowest id lies alone.
  const std::vector<std::pair<NodeId, uint64_t>> digests = {
      {ids[0], 1}, {ids[1], 900}, {ids[2], 900}};
  EXPECT_EQ(ResyncSource(digests, 900, 0), std::nullopt);
  std::optional<NodeId> from = ResyncSource(digests, 1, 0);
  ASSERT_TRUE(from.has_value());
  EXPECT_NE(*from, ids[0]);
}

// Note [Choosing the reference]: a tie was decided by the smaller digest, a
// value the peer picks: a liar reporting 0 won it against an honest replica
// and served its own state. Now each replica of a tie keeps its own.
TEST(ResyncSourceTest, AReplicaInATieKeepsItsStateWhateverTheOtherDigest) {
  const std::vector<NodeId> ids = SortedIds(2);
  for (int liar = 0; liar < 2; ++liar) {
    const NodeId honest = ids[1 - liar];
    std::vector<std::pair<NodeId, uint64_t>> digests = {{ids[0], 0}, {ids[1], 0}};
    for (auto& [id, d] : digests) d = id == honest ? 77 : 0;  // the liar reports 0
    EXPECT_EQ(ResyncSource(digests, 77, 0), std::nullopt) << "liar " << liar;
    EXPECT_EQ(ResyncSource(digests, 77, 1), std::nullopt) << "liar " << liar;
  }
}

// With nobody on probation, 4 replicas split 2:2 each keep their state, and
// a fifth outside the tie follows the digest of the lowest id, not the
// smaller digest.
TEST(ResyncSourceTest, AReplicaOutsideATieFollowsTheLowestIdNotTheSmallerDigest) {
  const std::vector<NodeId> ids = SortedIds(5);
  const std::vector<std::pair<NodeId, uint64_t>> digests = {
      {ids[0], 900}, {ids[1], 5}, {ids[2], 900}, {ids[3], 5}, {ids[4], 1}};
  EXPECT_EQ(ResyncSource(digests, 900, 0), std::nullopt);
  EXPECT_EQ(ResyncSource(digests, 5, 0), std::nullopt);
  std::optional<NodeId> from = ResyncSource(digests, 1, 0);
  ASSERT_TRUE(from.has_value());
  EXPECT_TRUE(*from == ids[0] || *from == ids[2]) << "a holder of 900, the lowest id's digest";
  EXPECT_EQ(ResyncSource(digests, 1, 1), ids[2]);
}

// A newcomer on probation that reports a small digest beside a trusted
// replica (the usual pair under probation) loses whatever its id or digest:
// the trusted replica keeps its state and the newcomer copies it.
TEST(ResyncSourceTest, ANewcomerNeverWinsAgainstATrustedReplica) {
  const std::vector<NodeId> ids = SortedIds(2);
  for (int newcomer = 0; newcomer < 2; ++newcomer) {
    const std::set<NodeId> probation = {ids[newcomer]};
    const NodeId trusted = ids[1 - newcomer];
    std::vector<std::pair<NodeId, uint64_t>> digests = {{ids[0], 0}, {ids[1], 0}};
    for (auto& [id, d] : digests) d = id == trusted ? 77 : 0;
    EXPECT_EQ(ResyncSource(digests, 77, 0, probation), std::nullopt) << newcomer;
    EXPECT_EQ(ResyncSource(digests, 0, 0, probation), trusted) << newcomer;
  }
}

// Newcomers in numbers (cheap identities) do not outvote a trusted replica,
// and never serve the state: only the reference's trusted holders do.
TEST(ResyncSourceTest, NewcomersInNumbersDoNotOutvoteTrustedReplicas) {
  const std::vector<NodeId> ids = SortedIds(5);
  const std::set<NodeId> probation = {ids[0], ids[1], ids[2]};
  const std::vector<std::pair<NodeId, uint64_t>> digests = {
      {ids[0], 1}, {ids[1], 1}, {ids[2], 1}, {ids[3], 50}, {ids[4], 60}};
  // 50 and 60 have one trusted holder each: each keeps its own.
  EXPECT_EQ(ResyncSource(digests, 50, 0, probation), std::nullopt);
  EXPECT_EQ(ResyncSource(digests, 60, 0, probation), std::nullopt);
  // The newcomers follow the lowest trusted id's digest.
  EXPECT_EQ(ResyncSource(digests, 1, 0, probation), ids[3]);
  // A newcomer that holds the trusted digest is not asked for it.
  const std::vector<std::pair<NodeId, uint64_t>> shared = {
      {ids[0], 50}, {ids[1], 1}, {ids[2], 1}, {ids[3], 50}, {ids[4], 50}};
  EXPECT_EQ(ResyncSource(shared, 1, 0, probation), ids[3]);
  EXPECT_EQ(ResyncSource(shared, 1, 1, probation), ids[4]);
  EXPECT_EQ(ResyncSource(shared, 1, 2, probation), ids[3]);
}

TEST(ResyncSourceTest, TheSourceRotatesAmongTheReferencesHolders) {
  const std::vector<NodeId> ids = SortedIds(4);
  const std::vector<std::pair<NodeId, uint64_t>> digests = {
      {ids[0], 3}, {ids[1], 8}, {ids[2], 8}, {ids[3], 8}};
  EXPECT_EQ(ResyncSource(digests, 3, 0), ids[1]);
  EXPECT_EQ(ResyncSource(digests, 3, 1), ids[2]);
  EXPECT_EQ(ResyncSource(digests, 3, 2), ids[3]);
}

TEST(ResyncSourceTest, NothingToCompare) {
  EXPECT_EQ(ResyncSource({}, 4, 0), std::nullopt);
}

}  // namespace
}  // namespace skipswarm::node
