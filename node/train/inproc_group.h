// InProcessGroupHub: GroupComm for nodes in one process (tests, the
// simulator). One hub is shared by every node; it knows the members and
// their stages, and learns of deaths through MarkDead (the harness plays
// the failure detector).
//
//   InProcessGroupHub hub(&clock, members);
//   ... node i uses &hub as its GroupComm ...
//   hub.MarkDead(killed);       // pending barriers / reduces finish without it
//
// A contribution's close_after (Note [Late members] in sharded_reduce.h)
// arms a clock timer at the round's first contribution: when it fires the
// round closes with the contributions it has; a member contributing later
// gets that result, flagged late.
//
// Note [Silent members in the hub]: as GrpcGroupComm does (Note [Silent
// members] in grpc_group_sweep.cc), a reduce that waits longer than the
// silent deadline for a host that sent nothing marks that host dead (out
// of this round and the later ones, as MarkDead) and finishes without it:
// a replica whose process lives but whose compute hangs (it never gets
// past EndIteration) otherwise held its healthy replicas at that
// iteration for good, and every micro-batch routed through them waited in
// their later-iteration queues until its deadline (the simulator's
// hung-replica run lost every micro-batch of three iterations). The
// deadline is the daemons' rule (silent_deadline.h) over completed barrier
// and reduce waits, each counted from its first arrival; a wait that ended
// by dropping a silent member is not a sample. The barrier drops a silent
// data node too, but only once its own bound has passed as well (Note
// [Stated bounds]).
//
// Note [Stated bounds]: the barrier measures the spread of the data
// nodes' arrivals, not how long a data node may legitimately take: with
// the measured rule alone (4 x the slowest barrier wait, 47.4 s) a LIVE
// data node whose MBs ran to their 54 s MB deadline in two waves (89.6 s)
// was dropped in the hung-replica run (sim/node_swarm_test.cc), the other
// ran ahead alone and that iteration completed 0 MBs (node/train/README.md).
// So each data node states, as it arrives at a barrier, an upper bound of
// its next iteration (GroupComm::StateIterationBound; the NodeTrainer
// passes DataNodeDriver::NextIterationBound: its MB deadline x (waves + 1)),
// counted from that barrier's release to it. The barrier drops a data node
// that has not arrived only once BOTH the measured deadline (from the
// barrier's first arrival) and kStatedBoundFactor x its last stated bound
// (from its last release) have passed; a data node that never stated a
// bound (a joiner before its first barrier; a caller that does not state)
// is never dropped. A dropped data node is out of the barriers and reduces
// of that iteration and later (the others' rounds of its stages close
// without it and keep their result for it, as for a late member: Note
// [Late members]; a round they did not hold, a group of one or one long
// forgotten, answers it UNAVAILABLE: its update is not applied and the
// digest check re-syncs it later), until it arrives at a barrier again: it then counts
// from the iteration after the newest barrier (those up to it may be
// over), and passes the older ones at once, forgotten ones too. A paused
// data node (Note [Paused training] in data_node_driver.h) may outlast its
// bound and be dropped; it comes back the same way. The rule's code is
// StatedDropTime (silent_deadline.h), shared with the daemons'
// GrpcGroupComm, where the statement rides the barrier message and a data
// node that never stated keeps the measured rule (Note [Stated bounds in
// the daemons] in grpc_group_sweep.cc). A statement counts at most what
// the data node's own recent pace allows (Note [Stated pace] in
// silent_deadline.h, the daemons' rule too): a data node that ran fast and
// then states a huge bound and hangs is dropped after minutes.
//
// Thread rule: thread-safe; results are delivered as zero-delay clock timers.
// The hub must outlive the clock's timers.
#ifndef SKIPSWARM_NODE_TRAIN_INPROC_GROUP_H_
#define SKIPSWARM_NODE_TRAIN_INPROC_GROUP_H_

#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "node/stage/swarm_view.h"
#include "node/train/data_node_wakes.h"
#include "node/train/group_comm.h"
#include "node/train/silent_deadline.h"

namespace skipswarm::node {

class InProcessGroupHub final : public GroupComm {
 public:
  // Reduces add whole contributions with RobustSum (Note [Robust
  // averaging] in robust_sum.h).
  // `pace`: Note [Stated pace] (silent_deadline.h), StatedPaceFor the
  // data nodes' DriverOptions.
  InProcessGroupHub(common::Clock* clock, std::vector<PeerInfo> members,
                    RobustOptions robust = {}, SilentDeadlineOptions silent = {},
                    StatedPaceOptions pace = {});
  // Cancels the silent deadlines still pending.
  ~InProcessGroupHub() override;

  // Note [Stated bounds]: a data node's bound on its next iteration.
  static constexpr double kStatedBoundFactor = node::kStatedBoundFactor;

  void Barrier(uint64_t iteration, const common::NodeId& self, bool data_node,
               BarrierDone done) override;
  void StateIterationBound(uint64_t iteration, const common::NodeId& self,
                           absl::Duration bound) override;
  void AllReduce(uint64_t iteration, int stage, GradientContribution contribution,
                 ReduceDone done) override;
  bool SoleReplica(uint64_t iteration, int stage, const common::NodeId& self) override;
  // The daemons' rule (GrpcGroupComm: the view's live stage-0 hosts): a
  // member hosting stage 0 that is not dead, whatever `iteration` (Note
  // [Relay without a data node] in data_node_wait.h).
  bool HasLiveDataNode(uint64_t iteration) override;
  // Note [Waking on a data node]: a wake runs when a live data node
  // arrives at a barrier or is admitted (at once when one is live).
  uint64_t WakeOnDataNode(absl::AnyInvocable<void()> wake) override;
  bool CancelDataNodeWake(uint64_t id) override;
  // PeerInfo::on_probation of the members it was made with (or admitted).
  bool OnProbation(const common::NodeId& id) override;
  void SetStateProvider(const common::NodeId& self, StateProvider provider) override;
  // Asks `from`'s provider every 10 ms (clock time) while it answers
  // UNAVAILABLE, at most 500 times.
  void FetchState(uint64_t iteration, int stage, const common::NodeId& from,
                  StateDone done) override;
  void MarkDead(const common::NodeId& id);
  // A member joins, or comes back (a replacement with the same identity;
  // its entry is replaced): it counts in the barriers and reduces of
  // `from_iteration` and later only, so rounds already under way do not
  // wait for it.
  void Admit(const PeerInfo& member, uint64_t from_iteration);

 private:
  struct BarrierState {
    absl::flat_hash_set<common::NodeId> arrived;
    std::vector<BarrierDone> waiters;
    // Note [Silent members in the hub]: the first data node's arrival;
    // sampled: its wait was recorded.
    std::optional<absl::Duration> since;
    bool sampled = false;
    // Note [Stated bounds]: the deadline's timer; whether it completed.
    common::TimerId silent_timer = common::kNoTimer;
    bool complete = false;
  };
  // Note [Stated bounds]: a data node's statement not yet released (the
  // barrier it was made at, its bound), and the last released one (its
  // bound, and when that barrier released the data node).
  struct Stated {
    std::optional<std::pair<uint64_t, absl::Duration>> pending;
    absl::Duration bound;  // as it counts (Note [Stated pace])
    std::optional<absl::Duration> released;
    StatedPace pace;
  };
  struct ReduceState {
    std::map<common::NodeId, GradientContribution> contributions;  // ascending id
    std::vector<ReduceDone> waiters;
    // Note [Late members] (sharded_reduce.h): the first contribution's
    // deadline is armed; it passed before every host contributed; the
    // result of the round it closed, which members arriving later get.
    bool deadline_armed = false;
    bool deadline_passed = false;
    std::shared_ptr<const absl::StatusOr<ReduceResult>> closed;
    // Note [Silent members in the hub]: the first contribution's time, its
    // silent deadline's timer, and whether its wait was recorded or is no
    // sample (it dropped silent hosts).
    std::optional<absl::Duration> since;
    common::TimerId silent_timer = common::kNoTimer;
    bool sampled = false;
  };
  // Completes whatever is complete; returns the callbacks to run. A call
  // that only added to one round sweeps that round only (`barrier` or
  // `reduce` set): the others cannot have changed (O(members) per call
  // instead of O(rounds x members); the simulator runs 1,000 nodes on it).
  struct Round {
    bool barrier = false;
    uint64_t iteration = 0;
    int stage = 0;
  };
  std::vector<absl::AnyInvocable<void()>> SweepLocked(const Round* only = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<common::NodeId> LiveHostsLocked(int stage, uint64_t iteration) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Note [Stated bounds]: whether a barrier dropped `id` for `iteration`.
  bool AwayLocked(const common::NodeId& id, uint64_t iteration) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Deliver(std::vector<absl::AnyInvocable<void()>> calls);
  // Note [Late members]: the deadline of round (iteration, stage) passed.
  void CloseLate(uint64_t iteration, int stage);
  // Note [Silent members in the hub]: the silent deadline of round
  // (iteration, stage) passed; the hosts that sent nothing are marked dead.
  void DropSilent(uint64_t iteration, int stage);
  // Note [Stated bounds]: the barrier of `iteration` reached its deadline
  // check; drops the data nodes past both rules, or re-arms.
  void DropSilentDataNodes(uint64_t iteration);
  void ArmBarrierLocked(uint64_t iteration, BarrierState& b, absl::Duration after)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Note [Stated bounds]: the barrier of `iteration` released data node
  // `id`: its statement made there counts from now.
  void ReleaseStatedLocked(const common::NodeId& id, uint64_t iteration)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TryFetch(uint64_t iteration, int stage, common::NodeId from,
                std::shared_ptr<StateDone> done, int attempt);
  bool HasLiveDataNodeLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  common::Clock* const clock_;
  absl::Mutex mu_;
  std::vector<PeerInfo> members_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<common::NodeId> dead_ ABSL_GUARDED_BY(mu_);
  const RobustOptions robust_;
  // Note [Silent members in the hub]: the deadline and its recent waits.
  SilentDeadline silent_ ABSL_GUARDED_BY(mu_);
  const StatedPaceOptions pace_;  // Note [Stated pace]
  // Members back from the dead: the first iteration they count in.
  absl::flat_hash_map<common::NodeId, uint64_t> back_from_ ABSL_GUARDED_BY(mu_);
  // Note [Stated bounds]: each data node's last statement; the data nodes
  // a barrier dropped: out of the barriers and reduces of [first, second)
  // (second: UINT64_MAX until it arrives again); the newest completed
  // barrier.
  absl::flat_hash_map<common::NodeId, Stated> stated_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<common::NodeId, std::pair<uint64_t, uint64_t>> away_ ABSL_GUARDED_BY(mu_);
  std::optional<uint64_t> last_complete_barrier_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, BarrierState> barriers_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<uint64_t, int>, ReduceState> reduces_ ABSL_GUARDED_BY(mu_);
  std::map<common::NodeId, StateProvider> providers_ ABSL_GUARDED_BY(mu_);
  DataNodeWakes data_node_wakes_;  // Note [Waking on a data node]; its own lock
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_INPROC_GROUP_H_
