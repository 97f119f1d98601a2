// Where a member restores a stage of its own that has no live replica
// from (Note [Restore from peer copies] in gossip_daemon_restore.cc): the
// newest state of it that anyone holds, this member's own included.
//
//   OrphanRestorePlan plan({2});
//   plan.AddOwn(2, computes[2]->step());          // when ours is a real state
//   for (each live peer) plan.AddHeld(source, *QueryHeldCopies(source, ...));
//   if (std::optional<int> s = plan.Missing()) ...  // no state of stage *s anywhere
//   const OrphanRestore& r = plan.stages().at(2);    // r.own: keep ours
//
// Note [Newest state wins]: the member that restores an orphaned stage may
// hold a state of it itself: a restarted member resumed its own checkpoint
// (its final one, written when it stopped, is newer than the copies its
// peers took at the last checkpoint boundary), and a member re-entering
// behind the swarm (Note [Behind on any stage]) holds the state it trained
// up to the iteration it stalled in. Restoring from the newest peer copy
// regardless threw those updates away: the stage went backwards to the
// copy's boundary and the updates between were reported lost although the
// member had them. The plan takes, per stage, whichever state is newest:
// the member's own when its step is at least every peer copy's iteration
// (a tie keeps ours: no transfer, the same boundary), else the newest copy
// and every peer holding that one. Own state is only what the member has
// trained or resumed: a compute still at step 0 (a joiner's fresh
// parameters, a restart without its disk) is no state of the stage and is
// not offered. A stage with neither is Missing(): the caller waits for a
// copy and fails at its start-up deadline naming it.
//
// Thread rule: a value type; not thread-safe.
#ifndef SKIPSWARM_NODE_DAEMON_GOSSIP_ORPHAN_RESTORE_H_
#define SKIPSWARM_NODE_DAEMON_GOSSIP_ORPHAN_RESTORE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "node/daemon/gossip/state_transfer.h"

namespace skipswarm::node {

// The state one orphaned stage is restored from.
struct OrphanRestore {
  bool found = false;
  bool own = false;        // this member's own state: nothing to fetch
  uint64_t iteration = 0;  // the boundary (step) of that state
  std::vector<StateSource> holders;  // peers holding a copy of `iteration` (when !own)
};

class OrphanRestorePlan {
 public:
  explicit OrphanRestorePlan(const std::vector<int>& orphaned);

  // This member's own state of `stage` is at `step`; ignored for a stage
  // not orphaned and for step <= 0 (no trained state, Note [Newest state
  // wins]).
  void AddOwn(int stage, int64_t step);
  // `holder` holds copies (stage, iteration) (QueryHeldCopies); stages not
  // orphaned are ignored.
  void AddHeld(const StateSource& holder, const std::vector<std::pair<int, uint64_t>>& held);

  // The first orphaned stage (ascending) of which nobody holds a state.
  std::optional<int> Missing() const;
  // The newest state's iteration over every orphaned stage (0 when none).
  uint64_t Newest() const;
  const std::map<int, OrphanRestore>& stages() const { return stages_; }

 private:
  std::map<int, OrphanRestore> stages_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_GOSSIP_ORPHAN_RESTORE_H_
