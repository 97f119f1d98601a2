#include "node/train/sharded_reduce.h"

#include <deque>
#include <functional>
#include <iostream>
#include <limits>
#include <algorithm>
#include <map>
#include <optional>
#include <memory>
#include <random>
#include <set>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace skipswarm::node {
namespace {

using common::NodeId;

// These tests check the reduce's messages and bytes; their made-up parts
// are not alike per visit as real gradients are, so centered clipping (Note
// [Robust averaging], covered by robust_sum_test and poisoned_replica_test)
// is off here. Clipping by norm and non-finite parts stay on.
RobustOptions MechanicsOnly() {
  RobustOptions o;
  o.outlier_factor = 0;
  return o;
}

// R replicas passing messages through one queue, delivered in a seeded
// random order; a killed replica's queued and later messages vanish.
class Group {
 public:
  Group(int replicas, int64_t n, uint64_t seed = 1, std::vector<uint64_t> bandwidths = {})
      : rng_(seed) {
    for (int r = 0; r < replicas; ++r) ids_.push_back(NodeId::ForName(absl::StrCat("r", r)));
    std::sort(ids_.begin(), ids_.end());
    for (int r = 0; r < replicas; ++r) {
      GradientContribution c;
      c.from = ids_[r];
      c.visits = r + 1;
      c.params_digest = 42;
      for (int64_t i = 0; i < n; ++i) c.flat.push_back(0.1f * (i % 13) + 0.37f * r + 1e-3f * i);
      own_.push_back(c);
      const uint64_t bandwidth = r < static_cast<int>(bandwidths.size()) ? bandwidths[r] : 0;
      reduces_.push_back(
          std::make_unique<ShardedReduce>(ids_[r], 5, 2, c, bandwidth, MechanicsOnly()));
    }
  }

  void StartAll(const std::vector<int>& who, const ShardLayout& layout = {}) {
    std::vector<NodeId> members;
    for (int r : who) members.push_back(ids_[r]);
    for (int r : who) Send(reduces_[r]->Start(members, layout));
  }
  void Start(int r, const std::vector<int>& who, const ShardLayout& layout = {}) {
    std::vector<NodeId> members;
    for (int x : who) members.push_back(ids_[x]);
    Send(reduces_[r]->Start(members, layout));
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
  // Note [Late members]: replica r closes the round without `late`.
  void CloseWithout(int r, const std::vector<int>& late) {
    std::vector<NodeId> ids;
    for (int x : late) ids.push_back(ids_[x]);
    Send(reduces_[r]->CloseWithout(ids));
  }

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

// Note [Robust averaging]: replicas whose messages are passed in FIFO order;
// `tamper` may change each message before it is delivered.
std::vector<absl::StatusOr<ReduceResult>> RunRound(
    std::vector<GradientContribution> own,
    const std::function<void(ReduceMessage*)>& tamper = nullptr,
    std::vector<absl::Status>* refused = nullptr) {
  std::vector<NodeId> ids;
  for (const GradientContribution& c : own) ids.push_back(c.from);
  std::vector<std::unique_ptr<ShardedReduce>> reduces;
  for (const GradientContribution& c : own) {
    reduces.push_back(std::make_unique<ShardedReduce>(c.from, 5, 2, c, 0, MechanicsOnly()));
  }
  std::deque<OutgoingReduce> queue;
  for (auto& r : reduces) {
    for (OutgoingReduce& o : r->Start(ids)) queue.push_back(std::move(o));
  }
  while (!queue.empty()) {
    OutgoingReduce o = std::move(queue.front());
    queue.pop_front();
    if (tamper) tamper(&o.message);
    const size_t to = std::find(ids.begin(), ids.end(), o.to) - ids.begin();
    auto out = reduces[to]->Receive(std::move(o.message));
    if (!out.ok()) {
      if (refused != nullptr) refused->push_back(out.status());
      continue;
    }
    for (OutgoingReduce& m : *out) queue.push_back(std::move(m));
  }
  std::vector<absl::StatusOr<ReduceResult>> results;
  for (auto& r : reduces) {
    results.push_back(r->done() ? r->result() : absl::UnavailableError("not done"));
  }
  return results;
}

std::vector<GradientContribution> ThreeReplicas(int64_t n) {
  std::vector<GradientContribution> own;
  for (int r = 0; r < 3; ++r) {
    GradientContribution c;
    c.from = NodeId::ForName(absl::StrCat("p", r));
    c.visits = 4;
    c.params_digest = 9;
    for (int64_t i = 0; i < n; ++i) c.flat.push_back(0.01f * ((i * 5 + r) % 11) - 0.05f);
    own.push_back(c);
  }
  std::sort(own.begin(), own.end(),
            [](const GradientContribution& a, const GradientContribution& b) {
              return a.from < b.from;
            });
  return own;
}

// One replica's NaN used to reach every replica's sum (and skip the step on
// all of them); now each shard's owner leaves it out and names the sender.
TEST(ShardedReduceTest, ANonFiniteContributionIsLeftOutOnEveryReplica) {
  std::vector<GradientContribution> own = ThreeReplicas(300);
  for (int64_t i = 0; i < 300; i += 50) own[1].flat[i] = std::numeric_limits<float>::quiet_NaN();
  std::vector<absl::StatusOr<ReduceResult>> results = RunRound(own);
  int named = 0;
  for (const auto& r : results) {
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->sum, results[0]->sum) << "every replica takes the same step";
    for (float x : r->sum) ASSERT_TRUE(std::isfinite(x));
    for (const PartVerdict& v : r->refused_parts) {
      EXPECT_EQ(v.from, own[1].from);
      EXPECT_EQ(v.kind, PartVerdict::Kind::kNonFinite);
      ++named;
    }
  }
  EXPECT_EQ(named, 3) << "each shard's owner names the sender once";
  // The mean over all visits is the honest replicas' mean.
  for (size_t i = 0; i < 300; ++i) {
    EXPECT_NEAR(results[0]->sum[i] / 12.0, (own[0].flat[i] + own[2].flat[i]) / 8.0, 1e-6);
  }
}

TEST(ShardedReduceTest, AScaledContributionIsClipped) {
  std::vector<GradientContribution> own = ThreeReplicas(300);
  for (float& x : own[2].flat) x *= 1e6f;
  std::vector<absl::StatusOr<ReduceResult>> results = RunRound(own);
  for (const auto& r : results) {
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->sum, results[0]->sum);
    ASSERT_EQ(r->refused_parts.size(), 1u);
    EXPECT_EQ(r->refused_parts[0].from, own[2].from);
    EXPECT_EQ(r->refused_parts[0].kind, PartVerdict::Kind::kClipped);
  }
  // At most the honest norms plus 8 x the (equal-visit) reference.
  const double honest = L2Norm(own[0].flat) + L2Norm(own[1].flat);
  EXPECT_LT(L2Norm(results[0]->sum), honest + 8.0 * 1.0001 * std::max(L2Norm(own[0].flat),
                                                                       L2Norm(own[1].flat)));
}

// A shard owner's reduced shard was accepted if its size was right; one
// with NaN where the receiver's own part is finite cannot be right.
TEST(ShardedReduceTest, APoisonedReducedShardIsRefusedAsDataLoss) {
  std::vector<GradientContribution> own = ThreeReplicas(300);
  std::vector<absl::Status> refused;
  std::vector<absl::StatusOr<ReduceResult>> results = RunRound(
      own,
      [&](ReduceMessage* m) {
        if (m->phase == ReduceMessage::Phase::kGather && m->from == own[0].from) {
          auto bad = std::make_shared<std::vector<float>>(*m->data);
          (*bad)[0] = std::numeric_limits<float>::quiet_NaN();
          m->data = bad;
        }
      },
      &refused);
  ASSERT_EQ(refused.size(), 2u);
  for (const absl::Status& s : refused) EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_FALSE(results[1].ok()) << "waits for a good shard 0 (or the owner's removal)";
  EXPECT_FALSE(results[2].ok());
}

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


TEST(ShardLayoutTest, WeightsAreProportionalToBandwidths) {
  // 10 / 10 / 2 MB/s: 1024 / 1024 / 205 (2/10 of the fastest, rounded).
  const ShardLayout l = ShardLayout::FromBandwidths({10'000'000, 10'000'000, 2'000'000});
  EXPECT_EQ(l.weights, (std::vector<uint32_t>{1024, 1024, 205}));
  const int64_t n = 2253;  // the weights' sum: every shard exactly its weight
  EXPECT_EQ(l.Range(n, 3, 0), (std::pair<int64_t, int64_t>{0, 1024}));
  EXPECT_EQ(l.Range(n, 3, 1), (std::pair<int64_t, int64_t>{1024, 2048}));
  EXPECT_EQ(l.Range(n, 3, 2), (std::pair<int64_t, int64_t>{2048, 2253}));
  // Shares of a large gradient within one element of the exact ratio.
  const int64_t big = 4'000'000;
  const auto [b2, e2] = l.Range(big, 3, 2);
  EXPECT_NEAR(static_cast<double>(e2 - b2) / big, 205.0 / 2253, 1e-6);
  EXPECT_EQ(e2, big);
}

TEST(ShardLayoutTest, UnknownOrEqualBandwidthsGiveEqualShards) {
  EXPECT_TRUE(ShardLayout::FromBandwidths({}).equal());
  EXPECT_TRUE(ShardLayout::FromBandwidths({5'000'000}).equal());
  EXPECT_TRUE(ShardLayout::FromBandwidths({5'000'000, 0, 7'000'000}).equal());
  EXPECT_TRUE(ShardLayout::FromBandwidths({3'000'000, 3'000'000, 3'000'000}).equal());
}

TEST(ShardLayoutTest, ClampsTheSpreadSoNobodyGetsAnEmptyShard) {
  // 1000x slower: raised to 1/8 of the fastest.
  const ShardLayout l = ShardLayout::FromBandwidths({1'000'000'000, 1'000'000, 1});
  EXPECT_EQ(l.weights, (std::vector<uint32_t>{1024, 128, 128}));
  for (int64_t n : {int64_t{10}, int64_t{1000}, int64_t{1} << 28}) {
    int64_t next = 0;
    for (int k = 0; k < 3; ++k) {
      const auto [b, e] = l.Range(n, 3, k);
      EXPECT_EQ(b, next);
      EXPECT_GT(e, b) << "n=" << n << " shard " << k;
      next = e;
    }
    EXPECT_EQ(next, n);
  }
  // Huge figures do not overflow.
  const ShardLayout h = ShardLayout::FromBandwidths({~uint64_t{0}, ~uint64_t{0} / 2});
  EXPECT_EQ(h.weights, (std::vector<uint32_t>{1024, 512}));
}

TEST(ShardLayoutTest, RefusesMalformedLayouts) {
  EXPECT_TRUE(ShardLayout{}.Validate(3).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(ShardLayout{{1, 2}}.Validate(3)));
  EXPECT_TRUE(absl::IsInvalidArgument(ShardLayout{{1, 0, 2}}.Validate(3)));
  EXPECT_TRUE(absl::IsInvalidArgument(ShardLayout{{1, 2, 1u << 20}}.Validate(3)));
}

TEST(ShardedReduceTest, SizedShardsGiveTheSameBytesAsEqualShards) {
  const std::vector<uint64_t> bw = {10'000'000, 2'000'000, 10'000'000, 7'000'000};
  for (int replicas : {2, 3, 4}) {
    for (uint64_t seed : {1, 2, 3}) {
      std::vector<uint64_t> mine(bw.begin(), bw.begin() + replicas);
      Group g(replicas, 1001, seed, mine);
      std::vector<int> all;
      std::vector<uint64_t> by_member;
      for (int r = 0; r < replicas; ++r) all.push_back(r);
      // The layout from the members' figures in member (id) order.
      for (int r = 0; r < replicas; ++r) by_member.push_back(mine[r]);
      const ShardLayout layout = ShardLayout::FromBandwidths(by_member);
      ASSERT_FALSE(layout.equal());
      g.StartAll(all, layout);
      g.Deliver();
      for (int r = 0; r < replicas; ++r) {
        ASSERT_TRUE(g.at(r).done()) << replicas << " replicas, replica " << r;
        const absl::StatusOr<ReduceResult>& res = g.at(r).result();
        ASSERT_TRUE(res.ok()) << res.status();
        EXPECT_EQ(res->sum, g.Expected(all));  // bitwise, as with equal shards
        EXPECT_EQ(res->shard_weights, layout.weights);
        EXPECT_FALSE(res->layout_adopted);
        // Every member gets every member's figure back, for the next layout.
        ASSERT_EQ(res->bandwidths.size(), static_cast<size_t>(replicas));
        for (int k = 0; k < replicas; ++k) {
          EXPECT_EQ(res->bandwidths[k], std::make_pair(g.id(k), mine[k]));
        }
      }
    }
  }
}

// Replicas that computed different layouts (a member re-entered the stage
// with older figures, a peer redid the previous round without it, a joiner
// has none) end on the round's first member's cut, whatever the delivery
// order and whichever cut the others had: the first member (replica 0, the
// lowest id) keeps its own, the others restart on it once.
TEST(ShardedReduceTest, DisagreeingLayoutsEndOnTheFirstMembersLayout) {
  const ShardLayout a = ShardLayout::FromBandwidths({10, 10, 2, 5});
  const ShardLayout b = ShardLayout::FromBandwidths({10, 9, 2, 5});
  ASSERT_FALSE(a.equal());
  ASSERT_NE(a, b);
  struct Case {
    std::vector<ShardLayout> start;  // each replica's own cut
  };
  const std::vector<Case> cases = {
      {{a, a, a, b}},              // one other member disagrees
      {{a, a, a, ShardLayout()}},  // one has no figures
      {{b, a, a, a}},              // the first member is the odd one
      {{ShardLayout(), a, b, a}},  // the first has no figures
      {{a, b, ShardLayout(), b}},  // everyone but one disagrees with it
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    for (uint64_t seed = 1; seed <= 20; ++seed) {
      SCOPED_TRACE(absl::StrCat("case ", c, " seed ", seed));
      Group g(4, 777, seed);
      const std::vector<ShardLayout>& start = cases[c].start;
      // Staggered starts: some messages arrive before their receiver starts.
      g.Start(1, {0, 1, 2, 3}, start[1]);
      g.Start(3, {0, 1, 2, 3}, start[3]);
      g.Deliver(3);
      g.Start(0, {0, 1, 2, 3}, start[0]);
      g.Deliver(static_cast<int>(seed % 5));
      g.Start(2, {0, 1, 2, 3}, start[2]);
      g.Deliver();
      for (int r = 0; r < 4; ++r) {
        ASSERT_TRUE(g.at(r).done()) << "replica " << r;
        const absl::StatusOr<ReduceResult>& res = g.at(r).result();
        ASSERT_TRUE(res.ok()) << res.status();
        EXPECT_EQ(res->sum, g.Expected({0, 1, 2, 3}));  // bitwise
        EXPECT_EQ(res->shard_weights, start[0].weights) << "replica " << r;
        EXPECT_EQ(res->layout_adopted, start[r] != start[0]) << "replica " << r;
      }
    }
  }
}

// Two replicas as after a re-entry under --outer_overlap: the one that
// re-entered cut the round by the older figures it kept, its peer (which
// redid the previous round alone) by none. Both end on the first's cut.
TEST(ShardedReduceTest, TwoReplicasWithDifferentFiguresEndOnOneLayout) {
  const ShardLayout sized = ShardLayout::FromBandwidths({250'000, 50'000});
  for (const bool first_has_figures : {true, false}) {
    for (uint64_t seed = 1; seed <= 10; ++seed) {
      SCOPED_TRACE(absl::StrCat(first_has_figures ? "first sized" : "first equal", " seed ",
                                seed));
      Group g(2, 1001, seed);
      const ShardLayout first = first_has_figures ? sized : ShardLayout();
      const ShardLayout second = first_has_figures ? ShardLayout() : sized;
      g.Start(static_cast<int>(seed % 2), {0, 1}, seed % 2 ? second : first);
      g.Deliver(1);
      g.Start(static_cast<int>(1 - seed % 2), {0, 1}, seed % 2 ? first : second);
      g.Deliver();
      for (int r = 0; r < 2; ++r) {
        ASSERT_TRUE(g.at(r).done() && g.at(r).result().ok()) << r;
        EXPECT_EQ(g.at(r).result()->sum, g.Expected({0, 1}));
        EXPECT_EQ(g.at(r).result()->shard_weights, first.weights) << r;
      }
      EXPECT_FALSE(g.at(0).result()->layout_adopted);
      EXPECT_TRUE(g.at(1).result()->layout_adopted);
    }
  }
}

// A member dies mid-way through a round on sized shards; the survivors
// redo it on the layout of their own figures.
TEST(ShardedReduceTest, SurvivorsOfSizedShardsFinishWithoutTheDead) {
  const std::vector<uint64_t> bw = {10'000'000, 10'000'000, 2'000'000, 4'000'000};
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    Group g(4, 999, seed, bw);
    g.StartAll({0, 1, 2, 3}, ShardLayout::FromBandwidths(bw));
    g.Deliver(5);
    g.Kill(1);
    const ShardLayout survivors = ShardLayout::FromBandwidths({bw[0], bw[2], bw[3]});
    g.Start(3, {0, 2, 3}, survivors);
    g.Deliver(3);
    g.Start(0, {0, 2, 3}, survivors);
    g.Deliver(2);
    g.Start(2, {0, 2, 3}, survivors);
    g.Deliver();
    for (int r : {0, 2, 3}) {
      ASSERT_TRUE(g.at(r).done()) << "seed " << seed << " replica " << r;
      ASSERT_TRUE(g.at(r).result().ok());
      EXPECT_EQ(g.at(r).result()->sum, g.Expected({0, 2, 3}));
      EXPECT_EQ(g.at(r).result()->contributors, 3);
      EXPECT_EQ(g.at(r).result()->shard_weights, survivors.weights);
    }
  }
}

TEST(ShardedReduceTest, RefusesAMalformedLayout) {
  std::vector<NodeId> ids = {NodeId::ForName("a"), NodeId::ForName("b")};
  std::sort(ids.begin(), ids.end());
  ShardedReduce a(ids[0], 0, 1, {ids[0], {1, 2, 3, 4}, 1, 7});
  a.Start(ids);
  ReduceMessage m;
  m.stage = 1;
  m.from = ids[1];
  m.members = ids;
  m.shard = 0;
  m.total = 4;
  m.data = std::make_shared<const std::vector<float>>(std::vector<float>{1, 2});
  m.layout.weights = {1, 2, 3};  // three weights for two members
  EXPECT_TRUE(absl::IsInvalidArgument(a.Receive(m).status()));
  m.layout.weights = {0, 2};
  EXPECT_TRUE(absl::IsInvalidArgument(a.Receive(m).status()));
}

// Simulated clock: each replica's uplink sends its messages one after the
// other at its bandwidth (downlinks and latency free); a message arrives
// when its last byte is sent. The round's time is when the last replica is
// done. Same state machine as over gRPC, deterministic.
class TimedRound {
 public:
  TimedRound(std::vector<double> uplink_bytes_per_second, int64_t n)
      : uplink_(std::move(uplink_bytes_per_second)) {
    const int r = static_cast<int>(uplink_.size());
    for (int k = 0; k < r; ++k) ids_.push_back(NodeId::ForName(absl::StrCat("t", k)));
    std::sort(ids_.begin(), ids_.end());
    for (int k = 0; k < r; ++k) {
      GradientContribution c;
      c.from = ids_[k];
      c.visits = 1;
      for (int64_t i = 0; i < n; ++i) c.flat.push_back(0.5f * k + 1e-4f * (i % 1000));
      own_.push_back(std::move(c));
    }
    free_at_.assign(r, 0);
    done_at_.assign(r, -1);
  }
  // Runs iteration `it` cut by `layout`; the round's seconds.
  double Run(uint64_t it, const ShardLayout& layout) {
    const int r = static_cast<int>(ids_.size());
    std::fill(free_at_.begin(), free_at_.end(), start_);
    std::fill(done_at_.begin(), done_at_.end(), -1);
    reduces_.clear();
    for (int k = 0; k < r; ++k) {
      reduces_.push_back(std::make_unique<ShardedReduce>(
          ids_[k], it, 1, own_[k], static_cast<uint64_t>(uplink_[k])));
    }
    for (int k = 0; k < r; ++k) Send(k, start_, reduces_[k]->Start(ids_, layout));
    while (!events_.empty()) {
      auto e = events_.begin();
      const double at = e->first.first;
      OutgoingReduce o = std::move(e->second);
      events_.erase(e);
      const int to = Index(o.to);
      auto out = reduces_[to]->Receive(std::move(o.message));
      EXPECT_TRUE(out.ok()) << out.status();
      if (!out.ok()) break;
      Send(to, at, *std::move(out));
      if (reduces_[to]->done() && done_at_[to] < 0) done_at_[to] = at;
    }
    double end = start_;
    for (int k = 0; k < r; ++k) {
      EXPECT_TRUE(reduces_[k]->done() && reduces_[k]->result().ok()) << k;
      end = std::max(end, done_at_[k]);
    }
    const double seconds = end - start_;
    start_ = end;
    return seconds;
  }
  const ReduceResult& result(int k) const { return *reduces_[k]->result(); }

 private:
  int Index(const NodeId& id) const {
    return static_cast<int>(std::find(ids_.begin(), ids_.end(), id) - ids_.begin());
  }
  void Send(int from, double now, std::vector<OutgoingReduce> out) {
    for (OutgoingReduce& o : out) {
      const double bytes = 4.0 * static_cast<double>(o.message.data->size());
      free_at_[from] = std::max(free_at_[from], now) + bytes / uplink_[from];
      events_.emplace(std::make_pair(free_at_[from], seq_++), std::move(o));
    }
  }
  std::vector<double> uplink_;
  std::vector<NodeId> ids_;
  std::vector<GradientContribution> own_;
  std::vector<std::unique_ptr<ShardedReduce>> reduces_;
  std::vector<double> free_at_, done_at_;
  std::map<std::pair<double, uint64_t>, OutgoingReduce> events_;
  uint64_t seq_ = 0;
  double start_ = 0;
};

// Issue 5: 3 replicas with 10 / 10 / 2 MB/s uplinks, 16 MB of gradient.
// The first round has no figures (equal shards) and hands every replica
// the figures; the second is cut by them.
TEST(ShardedReduceTest, TimedRoundIsShorterWithSizedShardsOnAHeterogeneousGroup) {
  const int64_t n = 4'000'000;  // 16 MB of float32
  TimedRound group({10e6, 10e6, 2e6}, n);
  const double equal = group.Run(0, ShardLayout());
  // The next layout from what the round handed back (the same on all).
  std::vector<uint64_t> figures;
  for (const auto& [id, b] : group.result(0).bandwidths) figures.push_back(b);
  for (int k = 1; k < 3; ++k) EXPECT_EQ(group.result(k).bandwidths, group.result(0).bandwidths);
  const ShardLayout sized = ShardLayout::FromBandwidths(figures);
  ASSERT_FALSE(sized.equal());
  const double with_sizes = group.Run(1, sized);
  EXPECT_EQ(group.result(0).sum, group.result(2).sum);
  // Equal: the slow uplink carries 2/3 n of scatter + 2/3 n of gather =
  // 10.67 MB at 2 MB/s; sized (205/2253 of n): 14.55 + 2.91 MB -> 8.73 s.
  EXPECT_NEAR(equal, 16e6 * 4 / 3 / 2e6, 0.01);
  EXPECT_NEAR(with_sizes, (16e6 * (1 + 205.0 / 2253)) / 2e6, 0.01);
  EXPECT_LT(with_sizes, 0.85 * equal);
  std::cout << "FIGURE timed_round_equal_s=" << equal << "\nFIGURE timed_round_sized_s="
            << with_sizes << "\nFIGURE timed_round_speedup=" << equal / with_sizes << "\n";
}

// Note [Late members]: replica 2's parts never arrive (a slow uplink);
// replica 0 closes it out at its deadline, replica 1 follows 0's smaller
// round, both average without it, and replica 2, which holds every part and
// so closes nobody out, is done with their average, flagged late.
TEST(ShardedReduceTest, ALateMemberIsClosedOutAndGetsTheOthersAverage) {
  Group g(3, 1001, /*seed=*/7);
  g.StartAll({0, 1, 2});
  auto not_from_2 = [&](int, const ReduceMessage& m) { return m.from != g.id(2); };
  g.DeliverIf(not_from_2);
  for (int r : {0, 1, 2}) EXPECT_FALSE(g.at(r).done()) << r;
  EXPECT_EQ(g.at(0).Late(), std::vector<NodeId>{g.id(2)});
  EXPECT_EQ(g.at(1).Late(), std::vector<NodeId>{g.id(2)});
  EXPECT_TRUE(g.at(2).Late().empty());  // it has every part of its shard
  g.CloseWithout(0, {2});
  g.DeliverIf(not_from_2);
  std::optional<std::vector<NodeId>> round = g.at(1).SmallerRoundWaiting();
  ASSERT_TRUE(round.has_value());
  EXPECT_EQ(*round, (std::vector<NodeId>{g.id(0), g.id(1)}));
  g.CloseWithout(1, {2});
  g.DeliverIf(not_from_2);
  for (int r : {0, 1, 2}) ASSERT_TRUE(g.at(r).done() && g.at(r).result().ok()) << r;
  const ReduceResult& survivor = *g.at(0).result();
  EXPECT_EQ(survivor.sum, g.Expected({0, 1}));
  EXPECT_EQ(survivor.contributors, 2);
  EXPECT_FALSE(survivor.late);
  EXPECT_EQ(survivor.left_out, std::vector<NodeId>{g.id(2)});
  EXPECT_EQ(g.at(1).result()->sum, survivor.sum);
  const ReduceResult& late = *g.at(2).result();
  EXPECT_TRUE(late.late);
  EXPECT_EQ(late.sum, survivor.sum);
  EXPECT_EQ(late.visits, survivor.visits);
  EXPECT_EQ(late.contributors, 2);
  EXPECT_EQ(late.digests, survivor.digests);
  EXPECT_EQ(late.left_out, std::vector<NodeId>{g.id(2)});
  // Its own parts arrive at last: nobody's result changes.
  g.Deliver();
  EXPECT_EQ(g.at(0).result()->sum, survivor.sum);
  EXPECT_TRUE(g.at(2).result()->late);
}

// Two replicas: the one on time averages alone; the late one takes its step.
TEST(ShardedReduceTest, OfTwoTheLateOneTakesTheOthersContribution) {
  Group g(2, 300, /*seed=*/3);
  g.StartAll({0, 1});
  g.DeliverIf([&](int, const ReduceMessage& m) { return m.from != g.id(1); });
  EXPECT_EQ(g.at(0).Late(), std::vector<NodeId>{g.id(1)});
  g.CloseWithout(0, {1});
  g.DeliverIf([&](int, const ReduceMessage& m) { return m.from != g.id(1); });
  ASSERT_TRUE(g.at(0).done() && g.at(1).done());
  EXPECT_EQ(g.at(0).result()->sum, g.Expected({0}));
  EXPECT_EQ(g.at(1).result()->sum, g.Expected({0}));
  EXPECT_TRUE(g.at(1).result()->late);
}

// A reduced shard of a round that leaves this replica out is only taken from
// its owner and for members of this replica's own round.
TEST(ShardedReduceTest, AClosedRoundFromAStrangerIsRefused) {
  Group g(3, 90);
  g.StartAll({0, 1, 2});
  ReduceMessage m;
  m.phase = ReduceMessage::Phase::kGather;
  m.iteration = 5;
  m.stage = 2;
  const NodeId stranger = NodeId::ForName("stranger");
  m.from = stranger;
  m.members = {g.id(0), stranger};
  std::sort(m.members.begin(), m.members.end());
  m.shard = m.members[0] == stranger ? 0 : 1;
  m.total = 90;
  m.data = std::make_shared<const std::vector<float>>(45, 1.0f);
  m.digests = {42, 42};
  m.bandwidths = {0, 0};
  EXPECT_FALSE(g.at(2).Receive(m).ok());
  EXPECT_FALSE(g.at(2).done());
}

}  // namespace
}  // namespace skipswarm::node
