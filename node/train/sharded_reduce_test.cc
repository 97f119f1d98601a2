#include "node/train/sharded_reduce.h"

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace skipswarm::node {
namespace {

using common::NodeId;

// R replicas passing messages through one queue, delivered in a seeded
// random order; a killed replica's queued and later messages vanish.
class Group {
 public:
  Group(int replicas, int64_t n, uint64_t seed = 1) : rng_(seed) {
    for (int r = 0; r < replicas; ++r) ids_.push_back(NodeId::ForName(absl::StrCat("r", r)));
    std::sort(ids_.begin(), ids_.end());
    for (int r = 0; r < replicas; ++r) {
      GradientContribution c;
      c.from = ids_[r];
      c.visits = r + 1;
      c.params_digest = 42;
      for (int64_t i = 0; i < n; ++i) c.flat.push_back(0.1f * (i % 13) + 0.37f * r + 1e-3f * i);
      own_.push_back(c);
      reduces_.push_back(std::make_unique<ShardedReduce>(ids_[r], 5, 2, c));
    }
  }

  void StartAll(const std::vector<int>& who) {
    std::vector<NodeId> members;
    for (int r : who) members.push_back(ids_[r]);
    for (int r : who) Send(reduces_[r]->Start(members));
  }
  void Start(int r, const std::vector<int>& who) {
    std::vector<NodeId> members;
    for (int x : who) members.push_back(ids_[x]);
    Send(reduces_[r]->Start(members));
  }
  // Delivers up to `count` queued messages (all: -1).
  void Deliver(int count = -1) {
    while (!queue_.empty() && count-- != 0) {
      std::uniform_int_distribution<size_t> pick(0, queue_.size() - 1);
      const size_t i = pick(rng_);
      OutgoingReduce o = std::move(queue_[i]);
      queue_.erase(queue_.begin() + i);
      const int to = Index(o.to);
      if (dead_.count(to) || dead_.count(Index(o.message.from))) continue;
      auto out = reduces_[to]->Receive(std::move(o.message));
      ASSERT_TRUE(out.ok()) << out.status();
      Send(*std::move(out));
    }
  }
  // Delivers (in queue order) every queued message `pass(to, from)` allows,
  // and those its answers produce, until none is left that passes.
  void DeliverIf(const std::function<bool(int to, const ReduceMessage& m)>& pass) {
    for (bool moved = true; moved;) {
      moved = false;
      for (size_t i = 0; i < queue_.size(); ++i) {
        if (!pass(Index(queue_[i].to), queue_[i].message)) continue;
        const int to = Index(queue_[i].to);
        OutgoingReduce o = std::move(queue_[i]);
        queue_.erase(queue_.begin() + i);
        auto out = reduces_[to]->Receive(std::move(o.message));
        ASSERT_TRUE(out.ok()) << out.status();
        Send(*std::move(out));
        moved = true;
        break;
      }
    }
  }
  void Restart(int r) {
    auto round = reduces_[r]->SmallerRoundWaiting();
    ASSERT_TRUE(round.has_value()) << r;
    Send(reduces_[r]->Start(*round));
  }
  void Kill(int r) { dead_.insert(r); }

  // Sum over `who` in ascending id order, whole vectors (the reference).
  std::vector<float> Expected(const std::vector<int>& who) const {
    std::vector<float> sum = own_[who[0]].flat;
    for (size_t k = 1; k < who.size(); ++k) {
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += own_[who[k]].flat[i];
    }
    return sum;
  }

  NodeId id(int r) const { return ids_[r]; }
  int Index(const NodeId& id) const {
    return static_cast<int>(std::find(ids_.begin(), ids_.end(), id) - ids_.begin());
  }
  ShardedReduce& at(int r) { return *reduces_[r]; }
  int64_t floats_sent(int r) const { return sent_.count(r) ? sent_.at(r) : 0; }
  size_t queued() const { return queue_.size(); }

 private:
  void Send(std::vector<OutgoingReduce> out) {
    for (OutgoingReduce& o : out) {
      sent_[Index(o.message.from)] += static_cast<int64_t>(o.message.data->size());
      queue_.push_back(std::move(o));
    }
  }
  std::mt19937_64 rng_;
  std::vector<NodeId> ids_;
  std::vector<GradientContribution> own_;
  std::vector<std::unique_ptr<ShardedReduce>> reduces_;
  std::deque<OutgoingReduce> queue_;
  std::set<int> dead_;
  std::map<int, int64_t> sent_;
};

TEST(ShardedReduceTest, ShardsCoverTheGradientOnce) {
  for (int64_t n : {0, 1, 5, 1000}) {
    for (int r = 1; r <= 5; ++r) {
      int64_t next = 0;
      for (int k = 0; k < r; ++k) {
        const auto [b, e] = ShardedReduce::ShardRange(n, r, k);
        EXPECT_EQ(b, next);
        EXPECT_GE(e, b);
        next = e;
      }
      EXPECT_EQ(next, n);
    }
  }
}

TEST(ShardedReduceTest, EveryReplicaGetsTheSameBytesAsAnAllToAllSum) {
  for (int replicas : {1, 2, 3, 4}) {
    for (uint64_t seed : {1, 2, 3}) {
      Group g(replicas, 1001, seed);
      std::vector<int> all;
      for (int r = 0; r < replicas; ++r) all.push_back(r);
      g.StartAll(all);
      g.Deliver();
      const std::vector<float> expected = g.Expected(all);
      for (int r = 0; r < replicas; ++r) {
        ASSERT_TRUE(g.at(r).done()) << replicas << " replicas, replica " << r;
        const absl::StatusOr<ReduceResult>& res = g.at(r).result();
        ASSERT_TRUE(res.ok()) << res.status();
        EXPECT_EQ(res->sum, expected);  // bitwise
        EXPECT_EQ(res->visits, replicas * (replicas + 1) / 2);
        EXPECT_EQ(res->contributors, replicas);
        EXPECT_TRUE(res->digests_agree);
        ASSERT_EQ(res->digests.size(), static_cast<size_t>(replicas));
        // 2 (R-1)/R of the gradient on the wire per replica (+ rounding).
        EXPECT_NEAR(g.floats_sent(r), 2.0 * (replicas - 1) / replicas * 1001, 2 * replicas);
      }
    }
  }
}

TEST(ShardedReduceTest, SurvivorsFinishWithoutAReplicaThatDiesMidWay) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    Group g(4, 999, seed);
    g.StartAll({0, 1, 2, 3});
    g.Deliver(5);  // some of the reduce-scatter is through
    g.Kill(2);
    for (int r : {0, 1, 3}) ASSERT_FALSE(g.at(r).done());
    // Survivors notice at different moments; a peer's new round may arrive
    // before this replica restarts (kept and replayed).
    g.Start(3, {0, 1, 3});
    g.Deliver(3);
    g.Start(0, {0, 1, 3});
    g.Deliver(2);
    g.Start(1, {0, 1, 3});
    g.Deliver();
    const std::vector<float> expected = g.Expected({0, 1, 3});
    for (int r : {0, 1, 3}) {
      ASSERT_TRUE(g.at(r).done()) << "seed " << seed << " replica " << r;
      ASSERT_TRUE(g.at(r).result().ok());
      EXPECT_EQ(g.at(r).result()->sum, expected);
      // Re-normalised by the survivors' visits: 1 + 2 + 4.
      EXPECT_EQ(g.at(r).result()->visits, 7);
      EXPECT_EQ(g.at(r).result()->contributors, 3);
    }
  }
}

// Replica 0 gives up on 3 and restarts; 1 and 2 still finish the round
// with 3 (its last messages reach them), having kept 0's new-round
// messages: they redo that round for 0, which then finishes too.
TEST(ShardedReduceTest, FinishedReplicasRedoASmallerRoundForALaggard) {
  Group g(4, 101);
  const NodeId three = g.id(3);
  auto gather_from_3_to_0 = [three](int to, const ReduceMessage& m) {
    return to == 0 && m.from == three && m.phase == ReduceMessage::Phase::kGather;
  };
  g.StartAll({0, 1, 2, 3});
  // Everything but 3's reduced shard for 0, and 3's shard for the others.
  g.DeliverIf([&](int to, const ReduceMessage& m) {
    return !gather_from_3_to_0(to, m) && !(m.from == three && m.phase == ReduceMessage::Phase::kGather);
  });
  ASSERT_FALSE(g.at(1).done());
  g.Start(0, {0, 1, 2});  // 0 gives up on 3
  g.DeliverIf([&](int, const ReduceMessage& m) { return m.from == g.id(0); });
  // 3's last shard reaches 1 and 2 only.
  g.DeliverIf([&](int to, const ReduceMessage& m) { return to != 0 && m.from == three; });
  ASSERT_TRUE(g.at(1).done() && g.at(2).done());
  EXPECT_EQ(g.at(1).result()->contributors, 4);
  ASSERT_FALSE(g.at(0).done());
  EXPECT_FALSE(g.at(3).SmallerRoundWaiting().has_value());
  g.Restart(1);
  g.Restart(2);
  g.DeliverIf([&](int to, const ReduceMessage& m) { return to != 3 && m.from != three; });
  ASSERT_TRUE(g.at(0).done());
  EXPECT_EQ(g.at(0).result()->contributors, 3);
  EXPECT_EQ(g.at(0).result()->sum, g.Expected({0, 1, 2}));
}

TEST(ShardedReduceTest, MissingNamesWhoTheRoundWaitsFor) {
  Group g(3, 10);
  g.StartAll({0, 1, 2});
  EXPECT_EQ(g.at(0).Missing().size(), 2u);
  g.Deliver();
  EXPECT_TRUE(g.at(0).Missing().empty());
}

TEST(ShardedReduceTest, ReportsDisagreeingDigests) {
  std::vector<NodeId> ids = {NodeId::ForName("a"), NodeId::ForName("b")};
  std::sort(ids.begin(), ids.end());
  ShardedReduce a(ids[0], 0, 1, {ids[0], {1, 2, 3, 4}, 1, 7});
  ShardedReduce b(ids[1], 0, 1, {ids[1], {1, 2, 3, 4}, 1, 8});
  auto to_b = a.Start(ids);
  auto to_a = b.Start(ids);
  for (auto& o : to_b) to_a.push_back(std::move(o));
  std::deque<OutgoingReduce> q(to_a.begin(), to_a.end());
  while (!q.empty()) {
    OutgoingReduce o = std::move(q.front());
    q.pop_front();
    auto out = (o.to == ids[0] ? a : b).Receive(std::move(o.message));
    ASSERT_TRUE(out.ok()) << out.status();
    for (auto& x : *out) q.push_back(std::move(x));
  }
  ASSERT_TRUE(a.done() && b.done());
  EXPECT_FALSE(a.result()->digests_agree);
  EXPECT_EQ(a.result()->digests,
            (std::vector<std::pair<NodeId, uint64_t>>{{ids[0], 7}, {ids[1], 8}}));
  EXPECT_EQ(a.result()->sum, (std::vector<float>{2, 4, 6, 8}));
}

TEST(ShardedReduceTest, RefusesMessagesThatCannotBelong) {
  std::vector<NodeId> ids = {NodeId::ForName("a"), NodeId::ForName("b")};
  std::sort(ids.begin(), ids.end());
  ShardedReduce a(ids[0], 0, 1, {ids[0], {1, 2, 3, 4}, 1, 7});
  a.Start(ids);
  ReduceMessage m;
  m.iteration = 0;
  m.stage = 1;
  m.from = ids[1];
  m.members = ids;
  m.shard = 0;
  m.total = 4;
  m.data = std::make_shared<const std::vector<float>>(std::vector<float>{1, 2, 3});  // 2 expected
  EXPECT_TRUE(absl::IsInvalidArgument(a.Receive(m).status()));
  m.data = std::make_shared<const std::vector<float>>(std::vector<float>{1, 2});
  m.total = 5;
  EXPECT_TRUE(absl::IsInvalidArgument(a.Receive(m).status()));
  m.total = 4;
  m.stage = 3;
  EXPECT_TRUE(absl::IsInvalidArgument(a.Receive(m).status()));
  m.stage = 1;
  m.members = {ids[1], ids[0]};  // not ascending
  EXPECT_TRUE(absl::IsInvalidArgument(a.Receive(m).status()));
  m.members = ids;
  EXPECT_TRUE(a.Receive(m).ok());
}

}  // namespace
}  // namespace skipswarm::node
