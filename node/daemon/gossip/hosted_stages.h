// The stages a gossip daemon hosts, as every thread sees them, and the
// checks that read them: whether the node may pause (Note [Paused members]
// in training_members.h) or leave.
//
//   HostedStages hosted({2});
//   hosted.BeginMove(3);   // the record names stage 3 from now on
//   ...
//   hosted.FinishMove();   // the switch: hosts stage 3 only
//   SS_RETURN_IF_ERROR(CheckPause(hosted.Get(), training, view, self, it, force));
//
// Note [Hosted stages snapshot]: the control service's thread (pause,
// drain) asks what this node hosts while main's thread may be switching
// stages (Note [Stage moves] in training_members.h). A check that read the
// hosted list and the pending move apart could see the old stage without
// the move (the list read before the switch, the move after it ended) and
// let the last unpaused replica of the new stage pause. So both live
// behind one lock and every reader gets them as one Snapshot: before the
// switch {old stage, moving to the new one}, after it {new stage}; both
// name the new stage.
//
// Thread rule: HostedStages is thread-safe; the functions are pure.
#ifndef SKIPSWARM_NODE_DAEMON_GOSSIP_HOSTED_STAGES_H_
#define SKIPSWARM_NODE_DAEMON_GOSSIP_HOSTED_STAGES_H_

#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/node_id.h"
#include "membership/view.h"

namespace skipswarm::node {

class HostedStages {
 public:
  struct Snapshot {
    std::vector<int> stages;       // hosted now
    std::optional<int> moving_to;  // a move announced and not switched yet
    // `stages` and `moving_to`: every stage whose replicas count this node
    // now or from the move's switch on.
    std::vector<int> Committed() const;
  };

  explicit HostedStages(std::vector<int> stages = {});
  HostedStages(const HostedStages&) = delete;
  HostedStages& operator=(const HostedStages&) = delete;

  // Before training (the given stages, or a joiner's choice).
  void Set(std::vector<int> stages);
  // A move to `to` is announced (our record names it from now on).
  void BeginMove(int to);
  // The switch: hosts the stage moved to only, in one step. No-op without
  // a move.
  void FinishMove();

  Snapshot Get() const;

 private:
  mutable absl::Mutex mu_;
  std::vector<int> stages_ ABSL_GUARDED_BY(mu_);
  std::optional<int> moving_to_ ABSL_GUARDED_BY(mu_);
};

// Note [Paused members]: FailedPrecondition for a data node (hosts stage
// 0), a node not `training` yet, or (without `force`) the last unpaused
// live replica in `iteration` of one of `hosted`'s committed stages.
absl::Status CheckPause(const HostedStages::Snapshot& hosted, bool training,
                        const membership::View& view, const common::NodeId& self,
                        uint64_t iteration, bool force);

// FailedPrecondition (without `force`) when no other replica of a stage it
// hosts stays in `iteration` (StayingReplicas: a member leaving at the same
// time does not count, Note [Simultaneous leavers]).
absl::Status CheckLeave(const HostedStages::Snapshot& hosted, const membership::View& view,
                        const common::NodeId& self, uint64_t iteration, bool force);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_GOSSIP_HOSTED_STAGES_H_
