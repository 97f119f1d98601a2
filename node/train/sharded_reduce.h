// ShardedReduce: one replica's side of the chunked reduce-scatter /
// all-gather that averages a stage's gradients over its replica group
// (docs/DESIGN.md §6; Note [Gradient exchange] in grpc_group.h). Transport-free:
// it turns received messages into messages to send, so the same state
// machine runs over gRPC (GrpcGroupComm) and in tests that pass messages by
// hand.
//
//   ShardedReduce r(self, iteration, stage, std::move(own), my_uplink);
//   Send(r.Start(live_replicas, layout));      // ascending ids, self included
//   ... on a message from a peer:   Send(r.Receive(std::move(m)));
//   ... when the view loses one:    Send(r.Start(fewer_replicas, their_layout));
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
// Shard sizes (Note [Shard layout]): the cut is a ShardLayout, one weight
// per member; shard k gets weight_k / sum of the elements. Every message
// carries its round's layout, and a round is only finished with messages
// of one layout from every member.
//
// Failures: a round only completes with a part from every member, so every
// shard of a completed round has the same contributors. When a member dies
// the caller restarts with the members left (Start): the round changes, the
// old one's state is dropped, and the survivors redo it from their kept
// contribution. Messages for a round this replica has not started (a peer
// noticed the death first) are kept and replayed when it gets there.
//
// Note [Late members]: a round whose contribution has a finite
// GradientContribution::close_after (outer syncs, Note [Outer steps] in
// node_trainer.h) does not wait for a member that is late: when the caller's
// deadline passes, the members whose reduce-scatter part of this replica's
// shard is still missing (Late()) are closed out (CloseWithout): the round
// restarts without them, as after a death but without marking them dead,
// and every survivor also sends its reduced shard to them. A survivor that
// sees a smaller round of its peers follows it (the first deadline decides
// for all). A member closed out recognises those shards (a round that does
// not name it, of members of its own round) and, once it holds all of
// them, is done with their average as its result (ReduceResult::late):
// it applies the average it missed and its peers' state stays its own.
// Only missing parts count as late: a member that holds every part is
// waiting for a reduced shard, which its owner sends once it is not
// waiting itself, so the slow member never closes its peers out. A member
// late only with its own reduced shard is waited for (Note [Silent
// members] in grpc_group_sweep.cc bounds that). A round restarted after a
// close or a death gets the whole deadline again: its survivors' parts must
// cross once more, and the spent deadline would close them out too.
//
// Note [Banned owners]: a member this replica bans (RobustOptions::banned,
// Note [Group bans] in grpc_group.h) still owns its shard of the round, and
// a liar reduces its shard as it likes: leaving its part out of the shards
// honest members own is not enough, its reduced shard would bring the lie
// back. So this replica never takes a banned owner's reduced shard. It
// names the banned owners in every part it sends (ReduceMessage::excluded),
// each member answers with its part of those shards (once per round and
// asker; a member never answers for its own shard), and, when most members
// other than the owner exclude it (as the parts of this replica's shard
// say), this replica reduces the owner's shard itself, with its own
// RobustSum: the banned owner's part is
// left out as in the shards honest members own (its share becomes the
// others' mean), the parts are added in ascending id order, and the round's
// visits, digests and figures are this replica's own shard's. Honest
// members that ban the same owner therefore compute the same bytes; the
// shard is not encoded (the codec's error feedback is the owner's). A ban
// that most members do not share (one peer's verdict on an honest member,
// seen in the mixed swarm) takes the owner's reduced shard as before:
// reducing it alone would split this replica from the group's bytes every
// round (a digest re-sync each iteration, Note [Digest re-sync] in
// node_trainer.h), while its own shard still leaves the part out. The
// banned owner, when most shun it, ends with its own shard differing from
// the group's and re-syncs by digest. The
// banned member stays in the round: it still sends its parts (left out)
// and gets every honest owner's reduced shard, so it keeps the group's
// weights (Note [Group bans]). Cost: each member asked sends R-2 more
// shard parts per banned owner and asker, nothing without a ban. A round
// waits for every member's part of a banned owner's shard as it waits for
// reduced shards (Missing() names the members whose parts are missing). A
// liar that asks for every shard gets, at most, every member's whole
// contribution once per round. Not covered: the reduced shards of a round
// that closed this replica out (Note [Late members]).
//
// Thread rule: not thread-safe; the owner serialises calls.
#ifndef SKIPSWARM_NODE_TRAIN_SHARDED_REDUCE_H_
#define SKIPSWARM_NODE_TRAIN_SHARDED_REDUCE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/node_id.h"
#include "node/train/group_comm.h"
#include "node/train/robust_sum.h"
#include "node/train/shard_codec.h"

namespace skipswarm::node {

// Note [Shard layout]
// Why: a member's uplink carries (n - s_k) floats of reduce-scatter and
// s_k of all-gather for its shard of s_k elements, so with equal
// shards a member on a slow link finishes last by n/R / its uplink;
// giving it a shard in proportion to its bandwidth makes the round end
// sooner (node/train/sharded_reduce_test.cc, TimedRound*: 3 replicas at
// 10/10/2 MB/s).
// Agreement: every member must cut the gradient the same way. The inputs
// are the members' own uplink figures (bytes/s, 0 = unknown), carried in
// the round's reduce-scatter messages and handed back to every member in
// the all-gather, so a finished round leaves every member with the same
// figures (ReduceResult::bandwidths); the next round's layout is computed
// from them (FromBandwidths: pure integer weights, no floating point in
// the cut). Members whose last finished rounds differ (one re-entered the
// stage with older figures, its peer redid the previous round without
// it, a joiner has none) compute different layouts, so the round's layout
// is its first member's (lowest id), carried in every message: the first
// member never changes its cut for another's; a member that receives the
// first member's message with another cut restarts the round on it
// (ReduceResult::layout_adopted), then replays the messages of that cut
// it kept from the others meanwhile (a message of another cut from a
// member other than the first is kept, the newest per sender and phase,
// until the first member's cut is known). Every member sends to every
// other one in the reduce-scatter, so every member hears the first
// member's cut and the round ends on it whatever the delivery order; a
// round cannot finish with mixed layouts because finishing takes a
// message of its layout from every member. A restart after this member
// encoded its reduced shard undoes that encoding's int8 error feedback
// (Note [Restarted rounds] in sharded_reduce.cc).
// Bounds: unknown figures (any member's) give equal shards; a figure is
// raised to at least 1/kMaxShardSpread of the largest, so no member's
// shard is more than kMaxShardSpread times another's (a wrong or
// exaggerated figure costs at most that much) and no member with a
// bandwidth gets an empty shard unless the gradient has fewer elements
// than the weights need (a few elements per member).
inline constexpr uint32_t kMaxShardSpread = 8;
inline constexpr uint32_t kShardWeightScale = 1024;  // weight of the fastest member

struct ShardLayout {
  // One weight per member (member order), each in [1, 2^16]; empty: equal
  // shards.
  std::vector<uint32_t> weights;

  // From each member's uplink figure in member order (bytes/s; 0 or any
  // member unknown: equal shards). Equal figures give the equal layout.
  static ShardLayout FromBandwidths(const std::vector<uint64_t>& bytes_per_second);
  bool equal() const { return weights.empty(); }
  // [begin, end) of shard `shard` of `total` elements cut for `members`
  // members. REQUIRES: weights empty or of size `members`.
  std::pair<int64_t, int64_t> Range(int64_t total, int members, int shard) const;
  // OK when usable for a round of `members`; INVALID_ARGUMENT otherwise
  // (a peer's layout).
  absl::Status Validate(int members) const;
  bool operator==(const ShardLayout& o) const { return weights == o.weights; }
  bool operator!=(const ShardLayout& o) const { return weights != o.weights; }
};

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
  // How `data` goes on the wire (Note [Encoded shards] in shard_codec.h):
  // null = as float32; else the encoded bytes `data` decodes from.
  std::shared_ptr<const std::string> payload;
  int64_t visits = 0;    // scatter: the sender's; gather: the round's total
  uint64_t digest = 0;   // scatter: the sender's parameter digest
  std::vector<uint64_t> digests;  // gather: every member's, in member order
  ShardLayout layout;             // the round's cut (Note [Shard layout])
  uint64_t bandwidth = 0;         // scatter: the sender's uplink figure, bytes/s
  // Scatter: the L2 norm of the sender's whole contribution (Note [Robust
  // averaging] in robust_sum.h); < 0: unknown.
  double norm = -1;
  std::vector<uint64_t> bandwidths;  // gather: every member's, in member order
  // Scatter: the members whose reduced shards the sender will not take
  // (Note [Banned owners]); it asks every receiver for its part of their
  // shards.
  std::vector<common::NodeId> excluded;
};

struct OutgoingReduce {
  common::NodeId to;
  ReduceMessage message;
};

class ShardedReduce {
 public:
  // `bandwidth`: this member's uplink figure (bytes/s, 0 = unknown), passed
  // on to every member for the next round's layout.
  // The owner of a shard adds its parts with RobustSum (`robust`).
  // `codec` (Note [Encoded shards] in shard_codec.h): how parts and
  // reduced shards are encoded; `gather_residual` (may be null; borrowed,
  // resized to the stage's elements) is this member's int8 error feedback
  // for the shards it owns, kept across rounds by the caller.
  ShardedReduce(common::NodeId self, uint64_t iteration, int stage, GradientContribution own,
                uint64_t bandwidth = 0, RobustOptions robust = {},
                model::AvgCodecSpec codec = {}, std::vector<float>* gather_residual = nullptr);

  // [begin, end) of shard `shard` when `total` elements are cut equally for
  // `members` members.
  static std::pair<int64_t, int64_t> ShardRange(int64_t total, int members, int shard);

  // (Re)starts the round over `members` (ascending, must contain self), cut
  // by `layout` (one weight per member after self is added; a layout of
  // another size is replaced by equal shards).
  std::vector<OutgoingReduce> Start(std::vector<common::NodeId> members,
                                    ShardLayout layout = {});
  // A peer's message. INVALID_ARGUMENT for one that cannot belong to this
  // reduce (wrong sizes, shard, sender); DATA_LOSS for a reduced shard that
  // cannot be right (not finite where this member's own part of it is:
  // Note [Robust averaging] leaves a non-finite part out, so the owner
  // lied); nothing changes then.
  absl::StatusOr<std::vector<OutgoingReduce>> Receive(ReduceMessage m);

  bool started() const { return !members_.empty(); }
  bool done() const { return done_; }
  // REQUIRES: done(). Fails if the members' gradients differ in size.
  const absl::StatusOr<ReduceResult>& result() const { return result_; }
  const std::vector<common::NodeId>& members() const { return members_; }
  // Payload bytes of every message this replica has emitted so far.
  int64_t sent_bytes() const { return sent_bytes_; }
  const ShardLayout& layout() const { return layout_; }
  // Members whose message the current round still waits for.
  std::vector<common::NodeId> Missing() const;
  // Note [Late members]: members whose reduce-scatter part of this
  // replica's shard is missing (none once it is reduced).
  std::vector<common::NodeId> Late() const;
  // Note [Late members]: restarts the round without `late` (Start with the
  // other members and `layout`) and sends them the reduced shard too.
  const std::vector<common::NodeId>& closed_out() const { return closed_out_; }
  std::vector<OutgoingReduce> CloseWithout(const std::vector<common::NodeId>& late,
                                           ShardLayout layout = {});
  // A round of fewer members (this one included) that peers have started
  // and sent us messages for: once this replica is done, it redoes that
  // round for them (Start) although its own result stands.
  std::optional<std::vector<common::NodeId>> SmallerRoundWaiting() const;

 private:
  struct Part {
    std::shared_ptr<const std::vector<float>> data;
    std::shared_ptr<const std::string> payload;  // as it came (null: float32)
    int64_t visits = 0;
    uint64_t digest = 0;
    std::vector<uint64_t> digests;
    uint64_t bandwidth = 0;
    std::vector<uint64_t> bandwidths;
    double norm = -1;
    std::vector<common::NodeId> excluded;  // scatter: the sender's (Note [Banned owners])
  };
  absl::Status Check(const ReduceMessage& m) const;
  // Note [Late members]: a reduced shard of a round that closed this
  // replica out.
  absl::Status ReceiveClosed(ReduceMessage m);
  // A checked message of the current members: layout agreement (Note
  // [Shard layout]), then Accept + Advance.
  // `checked`: Check(m) passed against the current round (Receive), so a
  // round that does not restart here does not read the shard again.
  void Take(ReduceMessage m, std::vector<OutgoingReduce>* out, bool checked = false);
  void Accept(ReduceMessage m);
  std::vector<OutgoingReduce> Advance();
  // Note [Banned owners]: this replica's parts of the shards `asks` names,
  // to `asker`, once per round each.
  void Answer(const common::NodeId& asker, const std::vector<common::NodeId>& asks,
              std::vector<OutgoingReduce>* out);
  // Note [Banned owners]: reduces the banned owners' shards whose parts are
  // all here. REQUIRES: reduced_.
  void ReduceBannedShards();
  bool Excluded(const common::NodeId& id) const;
  // Note [Banned owners]: whether most members other than the owner of
  // shard `k` exclude it (their parts of this replica's shard say so).
  // REQUIRES: reduced_.
  bool Shunned(int k) const;
  int IndexOf(const common::NodeId& id) const;
  ReduceMessage Message(ReduceMessage::Phase phase, int shard) const;
  // Adds the payload bytes of `out` to sent_bytes_.
  void Count(const std::vector<OutgoingReduce>& out);
  // The owner's encoding of its reduced shard; `reduced` becomes what
  // every member decodes from it.
  void EncodeReduced(Part* reduced);
  // Note [Restarted rounds]: puts back the residual of an encoding not used.
  void UndoResidual();

  const common::NodeId self_;
  const uint64_t iteration_;
  const int stage_;
  const GradientContribution own_;
  const uint64_t bandwidth_;
  const RobustOptions robust_;
  const double own_norm_;  // L2 norm of own_.flat (NaN if not finite)
  const model::AvgCodecSpec codec_;
  std::vector<float>* const gather_residual_;
  int64_t sent_bytes_ = 0;
  std::vector<common::NodeId> members_;
  ShardLayout layout_;
  bool adopted_ = false;  // this member took the first member's cut
  // Note [Shard layout]: messages of another cut from members other than
  // the first, by sender, phase and cut, until the first member's cut is
  // known.
  // (Sender, phase, shard, cut.)
  using ParkedKey = std::tuple<common::NodeId, int, int, std::vector<uint32_t>>;
  std::map<ParkedKey, ReduceMessage> parked_;
  // Note [Restarted rounds]: the residual this member's encoding of its
  // reduced shard replaced (from residual_undo_begin_), until the round's
  // result; settled_: a result was reached (later encodings, for peers
  // redoing the round, leave the residual alone).
  std::vector<float> residual_undo_;
  int64_t residual_undo_begin_ = 0;
  bool settled_ = false;
  int index_ = -1;  // this replica's shard
  std::map<common::NodeId, Part> scatter_;  // parts of my shard, by sender
  // Note [Banned owners]: the round's members this replica bans, ascending;
  // the parts of their shards, by shard and sender (this replica's own
  // included); their owners' own reduced shards, taken only without a
  // majority; the verdicts of reducing them; the (asker, shard) pairs this
  // replica has sent its part of a shard to.
  std::vector<common::NodeId> excluded_;
  std::map<int, std::map<common::NodeId, Part>> banned_parts_;
  std::map<int, Part> banned_owners_shards_;
  std::vector<PartVerdict> banned_verdicts_;
  std::set<std::pair<common::NodeId, int>> answered_;
  std::map<int, Part> gather_;              // reduced shards, by shard
  bool reduced_ = false;
  std::vector<PartVerdict> verdicts_;  // of this member's shard, this round
  bool done_ = false;
  absl::StatusOr<ReduceResult> result_ = absl::UnavailableError("not done");
  // Note [Late members]: members closed out (sent the reduced shard), and
  // the reduced shards of rounds that closed this replica out, by round
  // and layout.
  std::vector<common::NodeId> closed_out_;
  std::map<std::pair<std::vector<common::NodeId>, std::vector<uint32_t>>, std::map<int, Part>>
      closed_;
  // Messages of rounds not started (yet), by round.
  std::map<std::vector<common::NodeId>, std::vector<ReduceMessage>> later_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_SHARDED_REDUCE_H_
