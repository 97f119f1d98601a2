// GroupComm: what the nodes of a swarm say to each other at an iteration
// boundary (docs/DESIGN.md §1, §6): a barrier ("every live data node finished
// iteration i") and, per stage, an all-reduce of the replicas' gradient
// sums and visit counts. Implementations: InProcessGroupHub (tests, the
// simulator, inproc_group.h) and GrpcGroupComm (daemons, over
// StageService.PushGradients, grpc_group.h).
//
//   group->Barrier(it, self, /*data_node=*/true, [&](absl::Status s) {
//     group->AllReduce(it, stage, {self, sum.flat, sum.visits, digest},
//                      [&](absl::StatusOr<ReduceResult> r) {
//                        compute->ApplyUpdate(r->sum, r->visits);
//                      });
//   });
//
// Semantics every implementation keeps:
//  * The reduce result is the same bytes on every replica: contributions are
//    added in ascending node-id order, so replicas take identical steps.
//    Each is checked first (Note [Robust averaging] in robust_sum.h): a
//    non-finite one is left out, an outsized one scaled down.
//  * A member that dies (MarkDead, or the transport says so) is dropped
//    from pending barriers and reduces; the rest finish without it. A
//    replica with zero visits still contributes (zeros) and gets the result.
//  * A member that answers probes but sends nothing is dropped once a
//    reduce or a barrier a data node reached has waited for it longer than
//    the silent deadline, from the measured waits (the hub: and longer
//    than the data node's own stated bound, Note [Stated bounds]): Note
//    [Silent members] in grpc_group_sweep.cc, Note [Silent members in the
//    hub] in inproc_group.h.
//  * params_digest is each replica's digest before the step; the result says
//    whether they all agreed (a diverged replica must re-sync; logged).
//  * A contribution with a finite close_after lets the round close without
//    the members that are still late that long after this replica's call
//    (Note [Late members] in sharded_reduce.h): the round averages what
//    arrived (ReduceResult::left_out names the rest), and a member left out
//    gets that average as its result, flagged `late`.
//
// Thread rule: thread-safe; `done` runs exactly once, never inline, with no
// lock held.
#ifndef SKIPSWARM_NODE_TRAIN_GROUP_COMM_H_
#define SKIPSWARM_NODE_TRAIN_GROUP_COMM_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/node_id.h"
#include "node/train/robust_sum.h"
#include "model/averaging_options.h"

namespace skipswarm::node {

struct GradientContribution {
  common::NodeId from;
  std::vector<float> flat;  // sum of this replica's MB gradients
  int64_t visits = 0;
  uint64_t params_digest = 0;
  // --avg_codec=powersgd: the factors `flat` was decoded from, so the
  // encoded shards carry them (Note [Encoded shards], shard_codec.h); null
  // otherwise.
  std::shared_ptr<const model::LowRankFactors> factors{};
  // Note [Late members] (sharded_reduce.h): the round may close without the
  // members still late this long after this call; infinite: it waits for
  // every live member (deaths aside), as gradient averages always do.
  absl::Duration close_after = absl::InfiniteDuration();
};

struct ReduceResult {
  std::vector<float> sum;     // sum over contributors (ascending id)
  int64_t visits = 0;         // total visits
  int contributors = 0;
  bool digests_agree = true;
  // Each contributor's parameter digest before the step, ascending id
  // (Note [Digest re-sync] in node_trainer.h).
  std::vector<std::pair<common::NodeId, uint64_t>> digests;
  // Each contributor's uplink figure (bytes/s, 0 = unknown), ascending id:
  // the next round's shard layout (Note [Shard layout] in sharded_reduce.h).
  // Implementations without shards leave it empty.
  std::vector<std::pair<common::NodeId, uint64_t>> bandwidths;
  // The shard weights the round used (empty: equal shards), and whether this
  // member's own cut differed and it took the round's first member's
  // (Note [Shard layout]).
  std::vector<uint32_t> shard_weights;
  bool layout_adopted = false;
  // Parts this replica left out or scaled down (Note [Robust averaging] in
  // robust_sum.h): with shards, those of the shard it owns.
  std::vector<PartVerdict> refused_parts;
  // Payload bytes this replica pushed for the reduce (its reduce-scatter
  // parts and all-gather shards, encoded: Note [Encoded shards]); 0 where
  // nothing crosses a wire (the in-process hub).
  int64_t sent_bytes = 0;
  // Note [Late members]: members of the round left out at its deadline
  // (ascending id), and whether this replica is one of them: then `sum` is
  // the others' average, without this replica's contribution.
  std::vector<common::NodeId> left_out;
  bool late = false;
};

using BarrierDone = absl::AnyInvocable<void(absl::Status status)>;
using ReduceDone = absl::AnyInvocable<void(absl::StatusOr<ReduceResult> result)>;
// Serves this node's state of `stage` as it is at the start of `iteration`
// (after its update of iteration - 1): UNAVAILABLE while it is not there
// yet, FAILED_PRECONDITION once it is past. Called on a group thread.
using StateProvider = std::function<absl::StatusOr<std::string>(int stage, uint64_t iteration)>;
using StateDone = absl::AnyInvocable<void(absl::StatusOr<std::string> state)>;

class GroupComm {
 public:
  virtual ~GroupComm() = default;
  // Arrives at the end of `iteration`; done when every live data node has
  // arrived. Non-data nodes arrive too (they only wait).
  virtual void Barrier(uint64_t iteration, const common::NodeId& self, bool data_node,
                       BarrierDone done) = 0;
  // Note [Stated bounds] (inproc_group.h): data node `self`, about to
  // arrive at `iteration`'s barrier, states that it arrives at the next
  // iteration's barrier within `bound` of this barrier's release (its MB
  // deadline x the waves it plans, plus slack). A group may drop a data
  // node from a barrier only once that bound has passed too. Default: a
  // no-op (GrpcGroupComm sends it with the barrier message: Note [Stated
  // bounds in the daemons] in grpc_group_sweep.cc).
  virtual void StateIterationBound(uint64_t iteration, const common::NodeId& self,
                                   absl::Duration bound) {}
  // This replica's contribution for `stage`; done with the sum over the
  // stage's live replicas.
  virtual void AllReduce(uint64_t iteration, int stage, GradientContribution contribution,
                         ReduceDone done) = 0;
  // Whether `self` is, as far as this member knows now, the only live
  // replica of `stage` for `iteration`'s reduce, with no peer's part of it
  // received: AllReduce would then answer with this replica's own
  // contribution alone, so the caller may skip the round (Note [Group of
  // one] in node_trainer.cc). False when unsure; the default.
  virtual bool SoleReplica(uint64_t iteration, int stage, const common::NodeId& self) {
    return false;
  }
  // Whether this member knows a live data node (a host of stage 0) for
  // `iteration`'s barrier: with none the barrier completes at once, and a
  // relay waits instead of running an empty iteration (Note [Relay without
  // a data node] in data_node_wait.h). True when unsure; the default.
  virtual bool HasLiveDataNode(uint64_t iteration) { return true; }
  // Note [Data node entered later] (data_node_wait.h): when HasLiveDataNode
  // is true only because a live data node enters after `iteration`, that
  // entry (a relay passes `iteration` empty); nullopt otherwise (a data
  // node trains in it, or none is known). For logs; the default: nullopt.
  virtual std::optional<uint64_t> LaterDataNodeEntry(uint64_t iteration) {
    return std::nullopt;
  }
  // Note [Waking on a data node] (data_node_wait.h): `wake` runs once,
  // never inline and with no lock held, as soon as this member learns of a
  // live data node (at once when it knows one already). Returns an id for
  // CancelDataNodeWake, or 0 where the group offers no wake (the default:
  // the caller's back-off alone).
  virtual uint64_t WakeOnDataNode(absl::AnyInvocable<void()> wake) { return 0; }
  // True when wake `id` was still armed: it will not run now.
  virtual bool CancelDataNodeWake(uint64_t id) { return false; }

  // Whether `id` is on newcomer probation as this member sees it now (Note
  // [Newcomer probation] in node/daemon/gossip/training_members.h): a
  // re-sync never takes a newcomer's state over a trusted replica's (Note
  // [Choosing the reference] in resync_source.h). False where nobody is on
  // probation (a closed swarm); the default.
  virtual bool OnProbation(const common::NodeId& id) { return false; }

  // State transfer between replicas (Note [Digest re-sync] in
  // node_trainer.h): what node `self` serves, and a fetch of `from`'s state
  // of `stage` at the start of `iteration` (UNAVAILABLE answers are retried
  // for a while; then done gets the last error).
  virtual void SetStateProvider(const common::NodeId& self, StateProvider provider) = 0;
  virtual void FetchState(uint64_t iteration, int stage, const common::NodeId& from,
                          StateDone done) = 0;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_GROUP_COMM_H_
