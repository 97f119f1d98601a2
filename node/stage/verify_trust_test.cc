#include "node/stage/verify_trust.h"

#include <gtest/gtest.h>

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

TEST(VerifiedRoutingViewTest, RoutesAroundTheCondemnedButKeepsThemAlive) {
  const NodeId a = NodeId::ForName("a"), b = NodeId::ForName("b"), d = NodeId::ForName("d");
  StaticSwarmView inner({{d, {0}, 4}, {a, {1}, 4}, {b, {1}, 4}});
  VerifyTrust trust(VerifyTrustOptions{.exclude_at = 1});
  VerifiedRoutingView view(&inner, &trust);
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

}  // namespace
}  // namespace skipswarm::node
