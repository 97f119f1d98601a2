// Note [Banned owners] (sharded_reduce.h): a banned member's reduced shard
// is never taken by a replica that bans it; that replica reduces the shard
// itself from the other members' parts.
#include <algorithm>
#include <cmath>
#include <deque>
#include <memory>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "node/train/sharded_reduce.h"

namespace skipswarm::node {
namespace {

using common::NodeId;

constexpr int64_t kElements = 300;
constexpr float kPoison = 1000.0f;

// `count` replicas of 4 visits each, ascending ids.
std::vector<GradientContribution> Replicas(int count = 3) {
  std::vector<GradientContribution> own;
  for (int r = 0; r < count; ++r) {
    GradientContribution c;
    c.from = NodeId::ForName(absl::StrCat("b", r));
    c.visits = 4;
    c.params_digest = 7;
    for (int64_t i = 0; i < kElements; ++i) {
      c.flat.push_back(0.01f * static_cast<float>((i * 7 + r) % 13) - 0.05f);
    }
    own.push_back(c);
  }
  std::sort(own.begin(), own.end(),
            [](const GradientContribution& a, const GradientContribution& b) {
              return a.from < b.from;
            });
  return own;
}

struct Outcome {
  std::vector<absl::StatusOr<ReduceResult>> results;
  int refused = 0;     // messages a replica refused
  int64_t floats = 0;  // floats sent in all
};

// One round over `own`, messages delivered in FIFO order. bans[r]: the
// members replica r bans. The member `liar` sends kPoison in its reduced
// shard and its parts sign-flipped x8.
Outcome RunRound(const std::vector<GradientContribution>& own,
            const std::vector<std::set<NodeId>>& bans, int liar) {
  std::vector<NodeId> ids;
  for (const GradientContribution& c : own) ids.push_back(c.from);
  std::vector<std::unique_ptr<ShardedReduce>> reduces;
  for (size_t r = 0; r < own.size(); ++r) {
    RobustOptions robust;
    robust.outlier_factor = 0;  // made-up parts; the bans are the subject
    robust.banned = bans[r];
    GradientContribution c = own[r];
    if (static_cast<int>(r) == liar) {
      for (float& x : c.flat) x *= -8.0f;
    }
    reduces.push_back(std::make_unique<ShardedReduce>(c.from, 5, 2, std::move(c), 0, robust));
  }
  Outcome outcome;
  std::deque<OutgoingReduce> queue;
  auto send = [&](std::vector<OutgoingReduce> out) {
    for (OutgoingReduce& o : out) {
      if (o.message.from == ids[liar] && o.message.phase == ReduceMessage::Phase::kGather) {
        o.message.data =
            std::make_shared<const std::vector<float>>(o.message.data->size(), kPoison);
      }
      outcome.floats += static_cast<int64_t>(o.message.data->size());
      queue.push_back(std::move(o));
    }
  };
  for (auto& r : reduces) send(r->Start(ids));
  while (!queue.empty()) {
    OutgoingReduce o = std::move(queue.front());
    queue.pop_front();
    const size_t to = std::find(ids.begin(), ids.end(), o.to) - ids.begin();
    auto out = reduces[to]->Receive(std::move(o.message));
    if (!out.ok()) {
      ++outcome.refused;
      continue;
    }
    send(*std::move(out));
  }
  for (auto& r : reduces) {
    outcome.results.push_back(r->done() ? r->result() : absl::UnavailableError("not done"));
  }
  return outcome;
}

// The honest sum with `liar` left out: the others' parts, scaled up to every
// visit (its share becomes their mean), as RobustSum does.
std::vector<float> HonestSum(const std::vector<GradientContribution>& own, int liar) {
  std::vector<float> sum(kElements, 0.0f);
  for (int r = 0; r < static_cast<int>(own.size()); ++r) {
    if (r == liar) continue;
    for (int64_t i = 0; i < kElements; ++i) sum[i] += own[r].flat[i];
  }
  const float all = 4.0f * static_cast<float>(own.size());
  for (float& x : sum) x *= all / (all - 4.0f);
  return sum;
}

// The liar owns a shard; both honest members ban it. Before, its poisoned
// reduced shard was what they applied for that third of the stage.
TEST(ShardedReduceBanTest, ABannedOwnersReducedShardIsNeverApplied) {
  const std::vector<GradientContribution> own = Replicas();
  for (int liar = 0; liar < 3; ++liar) {  // the first, a middle and the last owner
    SCOPED_TRACE(absl::StrCat("liar ", liar));
    std::vector<std::set<NodeId>> bans(3);
    for (int r = 0; r < 3; ++r) {
      if (r != liar) bans[r] = {own[liar].from};
    }
    const Outcome outcome = RunRound(own, bans, liar);
    EXPECT_EQ(outcome.refused, 0);
    const std::vector<float> expected = HonestSum(own, liar);
    std::vector<float> sum;
    for (int r = 0; r < 3; ++r) {
      const absl::StatusOr<ReduceResult>& result = outcome.results[r];
      ASSERT_TRUE(result.ok()) << r << ": " << result.status();
      EXPECT_EQ(result->visits, 12);
      if (r == liar) continue;  // it applies what it likes
      if (sum.empty()) sum = result->sum;
      EXPECT_EQ(result->sum, sum) << "the honest members take the same bytes";
      ASSERT_EQ(result->sum.size(), expected.size());
      for (int64_t i = 0; i < kElements; ++i) {
        ASSERT_NEAR(result->sum[i], expected[i], 1e-5) << "element " << i << " of replica " << r;
      }
    }
    // The liar still gets both honest owners' shards: the group's weights.
    const ReduceResult& liars = *outcome.results[liar];
    const auto [begin, end] = ShardedReduce::ShardRange(kElements, 3, liar == 0 ? 1 : 0);
    for (int64_t i = begin; i < end; ++i) ASSERT_NEAR(liars.sum[i], expected[i], 1e-5);
  }
}

// One honest member bans the liar, the other does not: most members do
// not shun it, so the one that bans it takes its shard too rather than
// split from the group's bytes every round. Every replica finishes.
TEST(ShardedReduceBanTest, ABanMostDoNotShareKeepsTheGroupsBytes) {
  const std::vector<GradientContribution> own = Replicas();
  const int liar = 1;
  std::vector<std::set<NodeId>> bans(3);
  bans[0] = {own[liar].from};
  const Outcome outcome = RunRound(own, bans, liar);
  EXPECT_EQ(outcome.refused, 0);
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(outcome.results[r].ok()) << r;
  EXPECT_EQ(outcome.results[0]->sum, outcome.results[2]->sum);
}

// Four replicas: two of the three honest ones ban the liar, a majority of
// the members other than it. Both reduce its shard themselves and take the
// same bytes; the third, which bans nobody, takes the liar's shard.
TEST(ShardedReduceBanTest, AMajorityReducesTheBannedOwnersShard) {
  const std::vector<GradientContribution> own = Replicas(4);
  const int liar = 1;
  std::vector<std::set<NodeId>> bans(4);
  bans[0] = bans[2] = {own[liar].from};
  const Outcome outcome = RunRound(own, bans, liar);
  EXPECT_EQ(outcome.refused, 0);
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(outcome.results[r].ok()) << r;
  EXPECT_EQ(outcome.results[0]->sum, outcome.results[2]->sum);
  const auto [begin, end] = ShardedReduce::ShardRange(kElements, 4, liar);
  const std::vector<float> expected = HonestSum(own, liar);
  for (int64_t i = begin; i < end; ++i) {
    ASSERT_NEAR(outcome.results[0]->sum[i], expected[i], 1e-5) << i;
    EXPECT_EQ(outcome.results[3]->sum[i], kPoison) << "replica 3 bans nobody";
  }
}

// Without a ban nothing extra crosses: 2 (R-1)/R n floats per member.
TEST(ShardedReduceBanTest, NoBanCostsNothing) {
  const std::vector<GradientContribution> own = Replicas();
  const Outcome plain = RunRound(own, std::vector<std::set<NodeId>>(3), 0);
  EXPECT_EQ(plain.floats, 3 * 2 * 2 * kElements / 3);
  std::vector<std::set<NodeId>> bans(3);
  bans[1] = bans[2] = {own[0].from};
  const Outcome banned = RunRound(own, bans, 0);
  // Each of the two asks the other for its part of shard 0: n/3 floats each.
  EXPECT_EQ(banned.floats, plain.floats + 2 * kElements / 3);
}

}  // namespace
}  // namespace skipswarm::node
