// NodeTrainer: one node's iteration loop (docs/DESIGN.md §1, §6), the same on
// data nodes and relays:
//
//   data node: driver.RunIteration(i) ──┐
//                                       ├─> group.Barrier(i) -> server.EndIteration(i)
//   relay:     ─────────────────────────┘     -> per hosted stage: TakeGradients,
//      group.AllReduce(i, stage) -> ApplyUpdate(sum, visits) (visit-weighted,
//      clipped AdamW) -> report -> server.BeginIteration(i + 1) -> next
//
//   NodeTrainer trainer(&server, computes, &driver_or_null, &group, &clock);
//   trainer.Run(/*first=*/0, /*count=*/50, on_iteration, on_done);
//
// A failed AllReduce applies no update but still advances the stage's step
// (ApplyUpdate with 0 visits): a stage's step is the swarm's iteration
// (Note [Restored step] in node/daemon/gossip/gossip_daemon_restore.cc).
//
// Note [Digest re-sync]: every replica sends its parameter digest with its
// gradients, so each reduce lists the digests of the states its members
// start the iteration from: the check after every step rides on the next
// gradient exchange instead of an extra round trip. When they disagree, the
// reference is chosen by Note [Choosing the reference] (resync_source.h):
// trusted holders first, then most holders, and a replica whose digest
// ties for best keeps its state. A replica whose digest differs skips the
// averaged update (its gradients are zeroed), fetches the state of a member
// holding the reference (rotating among its trusted holders by iteration,
// so one that serves a bad state is not asked again and again, and one
// caught at it is trusted no more: Note [Checked re-sync]) as it is after that
// member's update of this
// iteration (GroupComm::FetchState, served by the provider every trainer
// installs: StageCompute::ExportState once the stage's update of
// iteration - 1 is applied), and imports it (StageCompute::ImportState:
// weights, AdamW state, step). Every replica then starts the next iteration
// equal, which that iteration's digests confirm. If the fetch fails the
// replica keeps its state and the next iteration tries again.
//
// Note [Non-finite steps]: when a stage's averaged gradient holds a NaN or
// an infinity (every replica's part of it did: one replica's alone is left
// out, Note [Robust averaging] in robust_sum.h), every replica skips that step (no update; step() still
// advances, as with zero visits): the averaged sum is the same bytes on
// every replica, so they all decide alike and their digests stay equal.
// After kMaxNonFiniteSteps consecutive skipped steps of one stage the
// trainer stops and on_done gets DATA_LOSS naming the stage, instead of
// training on with nonsense.
//
// Note [Outer steps]: how a stage's replicas average is the compute's
// (StageCompute::averaging(), from --outer_every / --avg_codec; every
// replica of a swarm is given the same). H = 1 with fp32 is the gradient
// average above, unchanged. H = 1 with a lossy codec: each replica's
// gradient sum goes through the codec (with error feedback for top-k and
// PowerSGD) before it is added; the sum is then the same bytes on every
// replica as before. H > 1 (DiLoCo): each replica steps on its own
// gradients (its own visits) and does not average; after every H-th step
// (step() % H == 0, equal on replicas) it sends its pseudo-gradient (what it
// moved since the last sync, through the codec) with the digest of the
// anchor it started from, the group sums them, and every replica applies
// the same outer Nesterov step to the anchor (ApplyOuterStep): parameters
// become the new anchor, equal on every replica. Disagreeing anchors re-sync
// as in Note [Digest re-sync]; the state fetched carries the anchor, outer
// momentum and residual (Note [Averaging state] in model/outer_optimizer.h).
// A failed sync keeps the local parameters (the next sync's pseudo-gradient
// covers both rounds); a non-finite averaged pseudo-gradient sends every
// replica back to the anchor (Note [Non-finite steps]).
//
// Note [Idle outer contributions]: a replica whose parameters still equal
// its anchor at a sync (none of its inner steps since had visits: a paused
// volunteer, Note [Paused members] in node/daemon/gossip/training_members.h,
// or a replica no micro-batch reached) sends zeros with no visit
// (AverageContribution::idle), and the outer step's mean is over the
// round's visits, i.e. the replicas that trained. Before, it counted as a
// contributor with a zero pseudo-gradient: with one of two replicas paused
// the group's outer step was halved, and a round in which nobody trained
// still took a momentum step. An idle replica still takes part in the
// round (its digest is checked, it owns its shard) and applies the same
// outer step, so its anchor and parameters stay its replicas'; a round
// with no visits at all takes no outer step (ApplyOuterStep with 0).
//
// Note [Overlapped sync]: with --outer_overlap (H > 1) a sync does not wait
// for its round. At step kH the replica sends its pseudo-gradient (anchor
// A - parameters, and the compute keeps the parameters of that moment) and
// goes on with its next H inner steps while the group averages; at step
// (k+1)H it first applies round k (waiting only if it is still not done:
// the sync then costs max(0, sync time - H steps) instead of the sync
// time): the new anchor A' = the outer step of A, and parameters A' plus
// what this replica trained since kH (ApplyOuterStep); then it starts
// round k+1 from A'. Anchors stay equal on every replica (the same sum and
// outer step), which the next round's digest check confirms; the applied
// update is one round old (as in overlapped / streaming DiLoCo). A replica
// that must re-sync (Note [Digest re-sync]) imports a peer's state and then
// still takes part in round k+1, so its peers do not wait for it. The last
// iteration of a run applies the round in flight and, at a sync point,
// syncs in full, so a run ends on the common anchor. A member whose round
// takes longer to upload than H steps' compute makes its peers' sync points
// wait for the excess every round (a bandwidth deficit; measured in
// node/train/README.md): the deadline (Note [Late members] in
// sharded_reduce.h, from NodeTrainer's measured pace) closes out only a
// member whose reduce-scatter part is still missing, not one late with its
// reduced shard. What removes the deficit is fewer bytes from that member:
// before each sync a replica budgets its upload from the last round's
// uplink figures and the H steps' time and, when it would not fit, sends
// only its largest int8 blocks (Note [Thinned uploads] in
// node/train/upload_budget.h and model/avg_codec.h).
//
// Note [Sync wait]: StageStep::sync_wait is the time from this replica's
// contribution to its reduce's result where the iteration waits for it
// (every H = 1 reduce, every sync without --outer_overlap), and with overlap
// the time a sync point waits for the round in flight (zero while the round
// ends within the H steps). Summed over iterations against their wall time
// it is the share of the iteration spent averaging, measured inside the
// node (skipswarm_stage_sync_wait_seconds_total, sync_wait_s in
// progress.jsonl). A member whose upload of a round takes longer than H
// steps' compute shows as a wait at its peers' sync points.
//
// Thread rule: thread-safe; callbacks run on clock / compute threads with no
// lock held. Everything borrowed must outlive the trainer; Stop() and then
// destroying it is safe at any time (pending callbacks become no-ops).
// Destruction waits for a callback in progress (an on_iteration call
// included) to return (common::LifetimeGuard), so what the callbacks use may
// go right after the trainer; it must not be destroyed from inside its own
// on_iteration.
#ifndef SKIPSWARM_NODE_TRAIN_NODE_TRAINER_H_
#define SKIPSWARM_NODE_TRAIN_NODE_TRAINER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "node/compute/stage_compute.h"
#include "node/stage/stage_server.h"
#include "node/train/data_node_driver.h"
#include "node/train/group_comm.h"

namespace skipswarm::node {

struct StageStep {
  UpdateStats update;
  int64_t visits_here = 0;   // this replica's visits
  int64_t visits_total = 0;  // over the replica group
  int replicas = 0;          // contributors
  bool digests_agree = true;
  // The digests the reduce compared (ReduceResult::digests) and this
  // replica's own among them: whom it may vouch for (Note [Newcomer
  // probation] in node/daemon/gossip/training_members.h).
  std::vector<std::pair<common::NodeId, uint64_t>> digests{};
  uint64_t digest_before = 0;
  bool resynced = false;  // this replica took a peer's state (Note [Digest re-sync])
  // Note [Checked re-sync] (resync_source.h): the source of this replica's
  // previous re-sync of the stage, caught serving a state it did not hold.
  std::optional<common::NodeId> resync_source_lied;
  // The averaged gradient was not finite: the step was skipped (Note
  // [Non-finite steps]).
  bool skipped_nonfinite = false;
  // The digest after the step; 0 where none was taken (Note [Digest on
  // demand]).
  uint64_t digest_after = 0;
  // Payload bytes this replica sent to the stage's average this
  // iteration: over gRPC what its pushes carried, encoded by the codec
  // (Note [Encoded shards] in shard_codec.h); in process, the codec's size
  // of its contribution (0 when it did not average: an inner step of Note
  // [Outer steps]).
  int64_t avg_bytes = 0;
  // Note [Outer steps]: this iteration ended with an outer step (H > 1).
  bool outer_step = false;
  // Note [Late members] (sharded_reduce.h): replicas its outer sync left
  // out at the deadline, and whether this one was late (it applied the
  // others' average without its own pseudo-gradient).
  int sync_left_out = 0;
  bool sync_late = false;
  // Note [Sync wait]: how long this iteration waited for the stage's
  // averaging, on the trainer's clock.
  absl::Duration sync_wait = absl::ZeroDuration();
  // Parts this replica left out or clipped as their shard's owner (Note
  // [Robust averaging] in robust_sum.h), each naming its sender.
  std::vector<PartVerdict> refused_parts;
};

struct NodeIterationReport {
  uint64_t iteration = 0;
  std::optional<IterationReport> data;  // data nodes only
  std::map<int, StageStep> stages;
  StageServerStats server;  // cumulative since the server started
  // Hops this node's server re-routed since the trainer's previous report
  // (its first: since the trainer was made): as a data node's first hop or
  // as a relay forwarding someone else's micro-batch. A re-route of this
  // iteration's hop that happens after its report counts in the next one.
  int64_t rerouted_here = 0;
  absl::Status status;  // a failed reduce or update
};

// Note [Digest on demand]: a digest reads every parameter (on a GPU, a
// copy of all of them to the host), so the trainer takes one only where a
// replica compares it: an H = 1 round's contribution (the digest after the
// step before, kept by the compute) and, with outer steps, after a sync.
// Between syncs (H > 1) the replicas differ by design, and a lone replica
// (Note [Group of one], Note [Lone outer replica] in node_trainer.cc) has
// nobody to compare with: digest_after stays 0 there. At the boundary a
// node publishes, for each of its `hosted` stages, the digest its step
// took (StepDigests; 0 where none was taken) in its state server's Health
// (node/daemon/gossip/state_transfer.h) instead of reading the parameters
// again; no reader of that value compares it, and a joiner checks the
// digest its snapshot carries, which the snapshot takes.
inline std::map<int, uint64_t> StepDigests(const NodeIterationReport& r,
                                           const std::vector<int>& hosted) {
  std::map<int, uint64_t> d;
  for (int stage : hosted) {
    auto step = r.stages.find(stage);
    d[stage] = step == r.stages.end() ? 0 : step->second.digest_after;
  }
  return d;
}

// Note [Stop point]
// A daemon that drains announces the last iteration it takes part in
// (Note [Leaving] in node/daemon/gossip/gossip_daemon.h) and its peers hold
// it in their barriers and averaging until then. That iteration must be
// the one the trainer stops after, and the trainer decides whether to go
// on in Finish, before it reports the iteration: a drain that read the
// daemon's iteration (advanced by the report) and then stopped the trainer
// could announce k while the trainer, past its decision, started k + 1,
// which its peers no longer waited for (a drain stuck until its 30 s
// bound). So the decision and the answer are one: Finish moves `current`
// to the next iteration under the lock where it reads the stop, and Stop
// returns `current` under the same lock. A stop asked from the report of
// k (a stage move's, gossip_daemon_move.cc) therefore returns k + 1.
class NodeTrainer {
 public:
  // Note [Non-finite steps].
  static constexpr int kMaxNonFiniteSteps = 3;

  using IterationCallback = absl::AnyInvocable<void(const NodeIterationReport&)>;
  using DoneCallback = absl::AnyInvocable<void(absl::Status)>;

  // `driver` is null on nodes that host no data stage.
  NodeTrainer(StageServer* server, std::map<int, StageCompute*> stages, DataNodeDriver* driver,
              GroupComm* group, common::Clock* clock);
  ~NodeTrainer();

  // Called before each iteration starts, on this node's data or relay side:
  // `hook(iteration, done)`; the iteration starts once `done` runs (an
  // error is logged and the iteration starts anyway; the hook reports its
  // own staleness). SDP backward masking refreshes its frozen stages here
  // (node/train/sdp_shadows.h). REQUIRES: not running.
  using StepDone = absl::AnyInvocable<void(absl::Status)>;
  using IterationHook = absl::AnyInvocable<void(uint64_t iteration, StepDone done)>;
  void SetBeforeIteration(IterationHook hook);

  // Runs iterations [first, first + count). REQUIRES: not running.
  void Run(uint64_t first, uint64_t count, IterationCallback on_iteration, DoneCallback on_done);
  // Stops after the current iteration's update (on_done gets CANCELLED);
  // a data node's paused iteration ends at once (Note [Paused training]
  // in data_node_driver.h), and so does a relay's wait for a data node
  // (Note [Relay without a data node] in data_node_wait.h). Returns the last iteration this trainer runs
  // (Note [Stop point]).
  uint64_t Stop();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_NODE_TRAINER_H_
