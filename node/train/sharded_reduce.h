// ShardedReduce: one replica's side of the chunked reduce-scatter /
// all-gather that averages a stage's gradients over its replica group
// (DESIGN.md §6; Note [Gradient exchange] in grpc_group.h). Transport-free:
// it turns received messages into messages to send, so the same state
// machine runs over gRPC (GrpcGroupComm) and in tests that pass messages by
// hand.
//
//   ShardedReduce r(self, iteration, stage, std::move(own));
//   Send(r.Start(live_replicas));              // ascending ids, self included
//   ... on a message from a peer:   Send(r.Receive(std::move(m)));
//   ... when the view loses one:    Send(r.Start(fewer_replicas));
//   if (r.done()) use(r.result());
//
// A round is the list of members (ascending id). The flat gradient of n
// elements is cut into one contiguous shard per member (ShardRange); member
// k owns shard k. Reduce-scatter: every member sends shard k of its own
// gradient to member k. Member k adds the R parts of shard k in ascending
// member order (the same additions, element by element, as summing whole
// contributions in that order, so the bytes equal the all-to-all result
// and every replica takes the identical step), then all-gathers: sends the
// reduced shard, with the round's total visits and every member's
// parameter digest, to every member. A replica is done when it holds all R
// reduced shards. Each replica sends 2 (R-1)/R n floats per round instead
// of n for all-to-all.
//
// Failures: a round only completes with a part from every member, so every
// shard of a completed round has the same contributors. When a member dies
// the caller restarts with the members left (Start): the round changes, the
// old one's state is dropped, and the survivors redo it from their kept
// contribution. Messages for a round this replica has not started (a peer
// noticed the death first) are kept and replayed when it gets there.
//
// Thread rule: not thread-safe; the owner serialises calls.
#ifndef SKIPSWARM_NODE_TRAIN_SHARDED_REDUCE_H_
#define SKIPSWARM_NODE_TRAIN_SHARDED_REDUCE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/node_id.h"
#include "node/train/group_comm.h"

namespace skipswarm::node {

struct ReduceMessage {
  enum class Phase { kScatter = 1, kGather = 2 };
  Phase phase = Phase::kScatter;
  uint64_t iteration = 0;
  int stage = 0;
  common::NodeId from;
  std::vector<common::NodeId> members;  // the round, ascending
  int shard = 0;
  int64_t total = 0;  // elements of the whole flat gradient
  std::shared_ptr<const std::vector<float>> data;  // the shard's elements
  int64_t visits = 0;    // scatter: the sender's; gather: the round's total
  uint64_t digest = 0;   // scatter: the sender's parameter digest
  std::vector<uint64_t> digests;  // gather: every member's, in member order
};

struct OutgoingReduce {
  common::NodeId to;
  ReduceMessage message;
};

class ShardedReduce {
 public:
  ShardedReduce(common::NodeId self, uint64_t iteration, int stage, GradientContribution own);

  // [begin, end) of shard `shard` when `total` elements are cut for
  // `members` members.
  static std::pair<int64_t, int64_t> ShardRange(int64_t total, int members, int shard);

  // (Re)starts the round over `members` (ascending, must contain self).
  std::vector<OutgoingReduce> Start(std::vector<common::NodeId> members);
  // A peer's message. INVALID_ARGUMENT for one that cannot belong to this
  // reduce (wrong sizes, shard, sender); nothing changes then.
  absl::StatusOr<std::vector<OutgoingReduce>> Receive(ReduceMessage m);

  bool started() const { return !members_.empty(); }
  bool done() const { return done_; }
  // REQUIRES: done(). Fails if the members' gradients differ in size.
  const absl::StatusOr<ReduceResult>& result() const { return result_; }
  const std::vector<common::NodeId>& members() const { return members_; }
  // Members whose message the current round still waits for.
  std::vector<common::NodeId> Missing() const;
  // A round of fewer members (this one included) that peers have started
  // and sent us messages for: once this replica is done, it redoes that
  // round for them (Start) although its own result stands.
  std::optional<std::vector<common::NodeId>> SmallerRoundWaiting() const;

 private:
  struct Part {
    std::shared_ptr<const std::vector<float>> data;
    int64_t visits = 0;
    uint64_t digest = 0;
    std::vector<uint64_t> digests;
  };
  absl::Status Check(const ReduceMessage& m) const;
  void Accept(ReduceMessage m);
  std::vector<OutgoingReduce> Advance();
  ReduceMessage Message(ReduceMessage::Phase phase, int shard) const;

  const common::NodeId self_;
  const uint64_t iteration_;
  const int stage_;
  const GradientContribution own_;
  std::vector<common::NodeId> members_;
  int index_ = -1;  // this replica's shard
  std::map<common::NodeId, Part> scatter_;  // parts of my shard, by sender
  std::map<int, Part> gather_;              // reduced shards, by shard
  bool reduced_ = false;
  bool done_ = false;
  absl::StatusOr<ReduceResult> result_ = absl::UnavailableError("not done");
  // Messages of rounds not started (yet), by round.
  std::map<std::vector<common::NodeId>, std::vector<ReduceMessage>> later_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_SHARDED_REDUCE_H_
