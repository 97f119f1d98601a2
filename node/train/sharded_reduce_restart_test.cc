// Note [Restarted rounds] (sharded_reduce.cc): the int8 error feedback an
// owner keeps for its reduced shards holds the error of the encodings that
// were used, once each, when a round restarts or is redone for a peer.
#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "node/train/sharded_reduce.h"

namespace skipswarm::node {
namespace {

using common::NodeId;

// The reduce's mechanics only (as sharded_reduce_test): no centered
// clipping of these made-up parts.
RobustOptions MechanicsOnly() {
  RobustOptions o;
  o.outlier_factor = 0;
  return o;
}

// int8 replicas each with its own error feedback
// for the shards it owns, passing messages FIFO through `pass`.
struct Int8Round {
  explicit Int8Round(const std::vector<int>& who, int64_t n) {
    model::AvgCodecSpec int8;
    int8.kind = model::AvgCodecKind::kInt8;
    int8.block_size = 64;
    for (int r : who) ids.push_back(NodeId::ForName(absl::StrCat("q", r)));
    residuals.resize(who.size());
    for (size_t k = 0; k < who.size(); ++k) {
      GradientContribution c;
      c.from = ids[k];
      c.visits = 1;
      c.params_digest = 3;
      for (int64_t i = 0; i < n; ++i) {
        c.flat.push_back(std::sin(0.37f * static_cast<float>(i) + static_cast<float>(who[k])) *
                         (1.0f + 0.01f * static_cast<float>(i % 17)));
      }
      reduces.push_back(std::make_unique<ShardedReduce>(ids[k], 9, 1, std::move(c), 0,
                                                        MechanicsOnly(), int8, &residuals[k]));
    }
  }
  void Start(size_t k, std::vector<NodeId> members) {
    for (OutgoingReduce& o : reduces[k]->Start(std::move(members))) queue.push_back(std::move(o));
  }
  void Deliver(const std::function<bool(const OutgoingReduce&)>& pass) {
    for (bool moved = true; moved;) {
      moved = false;
      for (size_t i = 0; i < queue.size(); ++i) {
        if (!pass(queue[i])) continue;
        OutgoingReduce o = std::move(queue[i]);
        queue.erase(queue.begin() + static_cast<std::ptrdiff_t>(i));
        const size_t to = std::find(ids.begin(), ids.end(), o.to) - ids.begin();
        auto out = reduces[to]->Receive(std::move(o.message));
        ASSERT_TRUE(out.ok()) << out.status();
        for (OutgoingReduce& m : *out) queue.push_back(std::move(m));
        moved = true;
        break;
      }
    }
  }
  std::vector<NodeId> ids;
  std::vector<std::vector<float>> residuals;
  std::vector<std::unique_ptr<ShardedReduce>> reduces;
  std::deque<OutgoingReduce> queue;
};

// Three int8 replicas have each reduced and encoded their shard when the
// third dies; the two survivors redo the round. The encodings of the
// abandoned round were never used, so each survivor's error feedback must
// be what the same two-replica round gives when nothing went wrong
// (before: the abandoned encoding's error stayed in it, to be "corrected"
// in the next round).
TEST(ShardedReduceRestartTest, ARestartedRoundKeepsTheErrorFeedbackOfTheRoundUsed) {
  const int64_t n = 1000;
  Int8Round clean({0, 1}, n);
  std::vector<NodeId> two = clean.ids;
  std::sort(two.begin(), two.end());
  clean.Start(0, two);
  clean.Start(1, two);
  clean.Deliver([](const OutgoingReduce&) { return true; });
  ASSERT_TRUE(clean.reduces[0]->done() && clean.reduces[1]->done());

  Int8Round hit({0, 1, 2}, n);
  std::vector<NodeId> three = hit.ids;
  std::sort(three.begin(), three.end());
  for (size_t k = 0; k < 3; ++k) hit.Start(k, three);
  // Every part of every shard arrives: each replica reduces and encodes.
  hit.Deliver([](const OutgoingReduce& o) {
    return o.message.phase == ReduceMessage::Phase::kScatter;
  });
  for (size_t k = 0; k < 3; ++k) {
    ASSERT_FALSE(hit.reduces[k]->done()) << k;
    ASSERT_TRUE(std::any_of(hit.residuals[k].begin(), hit.residuals[k].end(),
                            [](float x) { return x != 0; }))
        << "replica " << k << " encoded nothing; the test needs its feedback";
  }
  // Replica 2 dies: its messages vanish, the survivors redo the round.
  const NodeId dead = hit.ids[2];
  std::deque<OutgoingReduce> kept;
  for (OutgoingReduce& o : hit.queue) {
    if (o.to != dead && o.message.from != dead) kept.push_back(std::move(o));
  }
  hit.queue = std::move(kept);
  hit.Start(0, two);
  hit.Start(1, two);
  hit.Deliver([&](const OutgoingReduce& o) { return o.to != dead; });
  for (size_t k = 0; k < 2; ++k) {
    ASSERT_TRUE(hit.reduces[k]->done() && hit.reduces[k]->result().ok()) << k;
    EXPECT_EQ(hit.reduces[k]->result()->sum, clean.reduces[k]->result()->sum) << k;
    EXPECT_EQ(hit.residuals[k], clean.residuals[k]) << "replica " << k;
  }
}

// A replica that finished the round and redoes a smaller one for a laggard
// (Note [Gradient exchange]) encodes its shard again for it, but its error
// feedback stays that of the round it used.
TEST(ShardedReduceRestartTest, RedoingARoundForALaggardLeavesTheErrorFeedbackAlone) {
  const int64_t n = 600;
  Int8Round round({0, 1, 2}, n);
  std::vector<NodeId> three = round.ids;
  std::sort(three.begin(), three.end());
  for (size_t k = 0; k < 3; ++k) round.Start(k, three);
  round.Deliver([](const OutgoingReduce&) { return true; });
  for (size_t k = 0; k < 3; ++k) ASSERT_TRUE(round.reduces[k]->done()) << k;
  const std::vector<std::vector<float>> after = round.residuals;
  // Replica 0 thinks replica 2 died and redoes the round without it;
  // replica 1, done, follows (as GrpcGroupComm's sweep does).
  std::vector<NodeId> two = {round.ids[0], round.ids[1]};
  std::sort(two.begin(), two.end());
  round.Start(0, two);
  round.Deliver([&](const OutgoingReduce& o) { return o.to != round.ids[2]; });
  std::optional<std::vector<NodeId>> smaller = round.reduces[1]->SmallerRoundWaiting();
  ASSERT_TRUE(smaller.has_value());
  round.Start(1, *smaller);
  const int64_t sent = round.reduces[0]->sent_bytes();
  round.Deliver([&](const OutgoingReduce& o) { return o.to != round.ids[2]; });
  ASSERT_GT(round.reduces[0]->sent_bytes(), sent) << "replica 0 sent no reduced shard again";
  EXPECT_EQ(round.residuals[0], after[0]);
  EXPECT_EQ(round.residuals[1], after[1]);
}

}  // namespace
}  // namespace skipswarm::node
