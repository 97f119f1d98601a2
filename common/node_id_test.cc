#include "common/node_id.h"

#include "absl/container/flat_hash_set.h"
#include "gtest/gtest.h"

namespace skipswarm::common {
namespace {

TEST(NodeIdTest, IsSha256OfThePublicKey) {
  // SHA-256("abc"), a published test vector.
  EXPECT_EQ(NodeId::FromPublicKey("abc").Hex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(NodeId::FromPublicKey("abc").ShortString(), "ba7816bf");
}

TEST(NodeIdTest, HexAndBytesRoundTrip) {
  NodeId id = NodeId::ForName("node-7");
  auto from_hex = NodeId::FromHex(id.Hex());
  ASSERT_TRUE(from_hex.ok());
  EXPECT_EQ(*from_hex, id);
  auto from_bytes = NodeId::FromBytes(id.Bytes());
  ASSERT_TRUE(from_bytes.ok());
  EXPECT_EQ(*from_bytes, id);
}

TEST(NodeIdTest, RejectsMalformedInput) {
  EXPECT_FALSE(NodeId::FromBytes("short").ok());
  EXPECT_FALSE(NodeId::FromHex("abc").ok());
  EXPECT_FALSE(NodeId::FromHex(std::string(64, 'g')).ok());
}

TEST(NodeIdTest, DefaultIsZeroAndDistinctNamesDiffer) {
  EXPECT_TRUE(NodeId().IsZero());
  absl::flat_hash_set<NodeId> ids;
  for (int i = 0; i < 100; ++i) ids.insert(NodeId::ForName(std::to_string(i)));
  EXPECT_EQ(ids.size(), 100u);
  EXPECT_FALSE(NodeId::ForName("a").IsZero());
}

}  // namespace
}  // namespace skipswarm::common
