// Note [Relay without a data node]: a barrier completes once every live
// data node has arrived (GroupComm::Barrier), so with no live data node in
// a relay's view it completes at once, and a relay (a node that hosts no
// data stage) used to run empty iterations back to back: thousands of them
// a second, each with its log lines, once the swarm's only data node left.
// Nothing trains in such an iteration (no micro-batch reaches a relay
// without a data node), so the relay waits instead: before an iteration
// starts it asks the group (GroupComm::HasLiveDataNode) and, while there is
// none, asks again after a back-off with jitter on the injected clock
// (kInitial doubling to kMax: a data node that reappears is seen within
// kMax; its barrier waits for the relay no longer than that, and its
// micro-batches do not wait at all, the relay's server being at that
// iteration already). One log line when the wait starts and one when it
// ends. NodeTrainer::Stop ends a waiting iteration at once (CANCELLED, as a
// paused data node's: Note [Paused training] in data_node_driver.h).
//
// Note [Waking on a data node]: the back-off alone made a returning data
// node wait up to kMax for the relay (at its first barrier: up to a
// second of training lost each time). So the wait also arms a wake with the group
// (GroupComm::WakeOnDataNode), which runs as soon as the group learns of a
// live data node: the hub when a live data node arrives at a barrier or is
// admitted; GrpcGroupComm at its next sweep (a barrier or gradient message
// received, a recheck) that finds one in the view. Whichever of the timer
// and the wake comes first takes the retry out of their shared slot and
// runs it; the other finds the slot empty (exactly one retry runs), and
// the next Ready or Cancel disarms it. The back-off stays the fallback for
// what no message announces (a view that gains a data node silently).
//
// Note [Data node entered later]: the group face lists a member from the
// entry iteration of its record (Note [Entry iteration] in
// node/daemon/gossip/training_members.h), so a data node that enters at e
// is no data node of an earlier iteration, in anyone's view. A relay
// waiting in i < e therefore waited for good: once the swarm's only data
// node left, its relays could stop in different iterations (one that
// started i while the data node was still in its view ran i empty when it
// left and waits in i + 1; one that heard of the leave first waits in i),
// and the restarted data node, restoring its stage from a peer's copy,
// enters at the newest iteration a replica waits in (Note [Restore from
// peer copies] in node/daemon/gossip/gossip_daemon_restore.cc): the relay
// still in i never started it, the data node's micro-batches of i + 1
// waited at it out their deadline and Note [Sole replica behind] moved it
// on minutes later. The data node cannot enter at i instead: the relay
// already past i applied i's (empty) update and refuses i's frames, so i
// would be lost for it. So the group also asks whether a live data node
// enters after the iteration (GrpcGroupOptions::data_node_enters_after;
// the daemon reads the records): then that iteration has no data node and
// never will, and the relay runs it as the other relay did, empty (its
// barrier completes at once, the update takes no visit), up to the entry,
// where the data node is in its view and it trains again. Its parameters
// are those of the relay that passed it (an empty iteration changes only
// the step, Note [Restored step] in
// node/daemon/gossip/gossip_daemon_restore.cc).
//
//   DataNodeWait wait(group, clock, seed);
//   if (wait.Ready(iteration, retry)) go();  // else `retry` runs later
//   wait.Cancel();                           // true: `retry` will not run
//
// Thread rule: thread-safe. `retry` runs on the clock's thread with no
// lock held; it must stay safe to call after its owner is gone (the
// trainer wraps it in its LifetimeGuard): the timer and the wake hold the
// slot, not the wait. The group and the clock must outlive the wait.
#ifndef SKIPSWARM_NODE_TRAIN_DATA_NODE_WAIT_H_
#define SKIPSWARM_NODE_TRAIN_DATA_NODE_WAIT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/backoff.h"
#include "common/clock.h"
#include "node/train/group_comm.h"

namespace skipswarm::node {

class DataNodeWait {
 public:
  static constexpr absl::Duration kInitial = absl::Milliseconds(50);
  static constexpr absl::Duration kMax = absl::Seconds(1);

  DataNodeWait(GroupComm* group, common::Clock* clock, uint64_t seed);
  // Disarms a pending retry (Cancel).
  ~DataNodeWait();

  // True when `iteration` may start now (the group knows a live data
  // node). Otherwise `retry` is armed after the next back-off delay and on
  // the group's wake, whichever comes first (it runs once), and false is
  // returned; the caller asks again from `retry`. A retry still armed from
  // an earlier call is disarmed (dropped) first.
  bool Ready(uint64_t iteration, absl::AnyInvocable<void()> retry);
  // Disarms a pending retry (its timer and its wake): true when one was
  // pending (it will not run).
  bool Cancel();
  // Retries armed since the trainer started (tests, logs).
  int64_t retries() const;

 private:
  // The armed retry, shared by its timer and its wake: the first to take it
  // runs it (Note [Waking on a data node]).
  struct Slot {
    absl::Mutex mu;
    absl::AnyInvocable<void()> retry ABSL_GUARDED_BY(mu);
    absl::AnyInvocable<void()> Take() {
      absl::MutexLock lock(&mu);
      return std::exchange(retry, nullptr);
    }
  };
  GroupComm* const group_;
  common::Clock* const clock_;
  mutable absl::Mutex mu_;
  common::Backoff backoff_ ABSL_GUARDED_BY(mu_);
  common::TimerId timer_ ABSL_GUARDED_BY(mu_) = common::kNoTimer;
  uint64_t wake_ ABSL_GUARDED_BY(mu_) = 0;
  std::shared_ptr<Slot> slot_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::Duration> waiting_since_ ABSL_GUARDED_BY(mu_);
  int64_t retries_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_DATA_NODE_WAIT_H_
