#include "node/stage/verify_pick.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <vector>

namespace skipswarm::node {
namespace {

PeerInfo Peer(const char* name, std::vector<int> stages, bool probation) {
  PeerInfo p;
  p.id = common::NodeId::ForName(name);
  p.stages = std::move(stages);
  p.on_probation = probation;
  return p;
}

TEST(VerifyPickTest, ChecksANewcomerAtTheRateAgainstTrustedReplicasOnly) {
  const PeerInfo x = Peer("x", {2}, true);
  PeerInfo sdp = Peer("sdp", {2}, false);
  sdp.subnetwork = true;
  const std::vector<PeerInfo> replicas = {x, Peer("t1", {1, 2}, false), Peer("t2", {2}, false),
                                          Peer("new", {2}, true), sdp, Peer("other", {3}, false)};
  common::Random rng(7);
  std::map<common::NodeId, int> picked;
  std::set<uint64_t> seeds;
  const int kDraws = 20000;
  for (int i = 0; i < kDraws; ++i) {
    std::optional<VerifyPick> p = PickVerifier(x, 2, replicas, 0.02, rng);
    if (!p) continue;
    ++picked[p->verifier];
    seeds.insert(p->seed);
  }
  int total = 0;
  for (const auto& [id, n] : picked) total += n;
  // Binomial(20000, 0.02): mean 400, sd 19.8; 5 sd either side.
  EXPECT_GT(total, 300);
  EXPECT_LT(total, 500);
  EXPECT_EQ(picked.size(), 2u);  // t1 and t2 only
  EXPECT_GT(picked[common::NodeId::ForName("t1")], total / 3);
  EXPECT_GT(picked[common::NodeId::ForName("t2")], total / 3);
  EXPECT_EQ(seeds.size(), static_cast<size_t>(total));  // a fresh seed every check
}

TEST(VerifyPickTest, NoCheckOfATrustedMemberOrWithoutATrustedReplica) {
  common::Random rng(1);
  const PeerInfo trusted = Peer("x", {1}, false);
  const PeerInfo newcomer = Peer("n", {1}, true);
  const std::vector<PeerInfo> with_trusted = {trusted, newcomer, Peer("t", {1}, false)};
  const std::vector<PeerInfo> newcomers_only = {newcomer, Peer("n2", {1}, true)};
  for (int i = 0; i < 100; ++i) {
    EXPECT_FALSE(PickVerifier(trusted, 1, with_trusted, 1.0, rng).has_value());
    EXPECT_FALSE(PickVerifier(newcomer, 1, newcomers_only, 1.0, rng).has_value());
    EXPECT_FALSE(PickVerifier(newcomer, 1, with_trusted, 0.0, rng).has_value());
    std::optional<VerifyPick> p = PickVerifier(newcomer, 1, with_trusted, 1.0, rng);
    ASSERT_TRUE(p.has_value());
    EXPECT_NE(p->verifier, newcomer.id);
  }
}

// Note [Sending checks]: a trusted replica whose record does not say it
// answers verify-only frames (an older build would train on one) is never
// the verifier; with no other, nothing is checked.
TEST(VerifyPickTest, NeverAReplicaThatDoesNotAnswerVerifyFrames) {
  common::Random rng(2);
  const PeerInfo newcomer = Peer("n", {1}, true);
  PeerInfo old = Peer("old", {1}, false);
  old.verify_frames = false;
  const std::vector<PeerInfo> both = {newcomer, old, Peer("t", {1}, false)};
  const std::vector<PeerInfo> old_only = {newcomer, old};
  for (int i = 0; i < 100; ++i) {
    std::optional<VerifyPick> p = PickVerifier(newcomer, 1, both, 1.0, rng);
    ASSERT_TRUE(p.has_value());
    EXPECT_EQ(p->verifier, common::NodeId::ForName("t"));
    EXPECT_FALSE(PickVerifier(newcomer, 1, old_only, 1.0, rng).has_value());
  }
}

// Note [Trusted disputes]: a trusted replica is checked at the trusted
// rate, against another trusted replica only (never itself, never a
// newcomer); without a trusted rate it is never checked.
TEST(VerifyPickTest, ATrustedReplicaIsCheckedAtTheTrustedRate) {
  const PeerInfo x = Peer("x", {1}, false);
  const std::vector<PeerInfo> replicas = {x, Peer("t", {1}, false), Peer("new", {1}, true)};
  common::Random rng(5);
  int picked = 0;
  for (int i = 0; i < 20000; ++i) {
    EXPECT_FALSE(PickVerifier(x, 1, replicas, 1.0, rng).has_value());
    std::optional<VerifyPick> p = PickVerifier(x, 1, replicas, 1.0, rng, /*trusted_rate=*/0.005);
    if (!p) continue;
    ++picked;
    EXPECT_EQ(p->verifier, common::NodeId::ForName("t"));
  }
  // Binomial(20000, 0.005): mean 100, sd 9.97; 5 sd either side.
  EXPECT_GT(picked, 50);
  EXPECT_LT(picked, 150);
}

TEST(VerifyPickTest, SameSeedSamePicks) {
  const PeerInfo x = Peer("x", {1}, true);
  const std::vector<PeerInfo> replicas = {x, Peer("a", {1}, false), Peer("b", {1}, false)};
  common::Random r1(3), r2(3);
  for (int i = 0; i < 1000; ++i) {
    std::optional<VerifyPick> a = PickVerifier(x, 1, replicas, 0.1, r1);
    std::optional<VerifyPick> b = PickVerifier(x, 1, replicas, 0.1, r2);
    ASSERT_EQ(a.has_value(), b.has_value());
    if (a) {
      EXPECT_EQ(a->verifier, b->verifier);
      EXPECT_EQ(a->seed, b->seed);
    }
  }
}

}  // namespace
}  // namespace skipswarm::node
