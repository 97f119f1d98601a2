#include "node/train/resync_source.h"

#include <algorithm>

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

// A tie went to the lowest node id, which a peer can grind; it now goes to
// the smaller digest, so a low id alone wins nothing.
TEST(ResyncSourceTest, ATieIsDecidedByContentNotByTheLowestId) {
  const std::vector<NodeId> ids = SortedIds(2);
  const std::vector<std::pair<NodeId, uint64_t>> digests = {{ids[0], 77}, {ids[1], 5}};
  EXPECT_EQ(ResyncSource(digests, 5, 0), std::nullopt) << "the smaller digest is the reference";
  EXPECT_EQ(ResyncSource(digests, 77, 0), ids[1]);
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
