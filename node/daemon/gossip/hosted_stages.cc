#include "node/daemon/gossip/hosted_stages.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "node/daemon/gossip/training_members.h"

namespace skipswarm::node {

std::vector<int> HostedStages::Snapshot::Committed() const {
  std::vector<int> out = stages;
  if (moving_to && std::find(out.begin(), out.end(), *moving_to) == out.end()) {
    out.push_back(*moving_to);
  }
  return out;
}

HostedStages::HostedStages(std::vector<int> stages) : stages_(std::move(stages)) {}

void HostedStages::Set(std::vector<int> stages) {
  absl::MutexLock lock(&mu_);
  stages_ = std::move(stages);
  moving_to_.reset();
}

void HostedStages::BeginMove(int to) {
  absl::MutexLock lock(&mu_);
  moving_to_ = to;
}

void HostedStages::FinishMove() {
  absl::MutexLock lock(&mu_);
  if (!moving_to_) return;
  stages_ = {*moving_to_};
  moving_to_.reset();
}

HostedStages::Snapshot HostedStages::Get() const {
  absl::MutexLock lock(&mu_);
  return Snapshot{stages_, moving_to_};
}

absl::Status CheckPause(const HostedStages::Snapshot& hosted, bool training,
                        const membership::View& view, const common::NodeId& self,
                        uint64_t iteration, bool force) {
  if (std::find(hosted.stages.begin(), hosted.stages.end(), 0) != hosted.stages.end()) {
    return absl::FailedPreconditionError(
        "a data node cannot pause: its share of every batch would go unread (drain it instead)");
  }
  if (hosted.stages.empty() || !training) {
    return absl::FailedPreconditionError("this node is not training yet");
  }
  if (force) return absl::OkStatus();
  // A move in progress (Note [Stage moves]): the stage we switch to must
  // keep an unpaused replica too.
  for (int s : hosted.Committed()) {
    bool other = false;
    for (const common::NodeId& id : OtherLiveReplicas(view, self, s, iteration)) {
      const membership::MemberInfo* m = view.Find(id);
      other |= m != nullptr && !m->paused;
    }
    if (!other) {
      return absl::FailedPreconditionError(absl::StrCat(
          "this node is the last unpaused live replica of stage ", s,
          "; pausing would stop the swarm's training (use --force to pause anyway)"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckLeave(const HostedStages::Snapshot& hosted, const membership::View& view,
                        const common::NodeId& self, uint64_t iteration, bool force) {
  if (force) return absl::OkStatus();
  for (int s : hosted.stages) {
    // Note [Simultaneous leavers]: another leaver does not stay.
    if (StayingReplicas(view, self, s, iteration).empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "this node is the last live replica of stage ", s,
          " that stays; leaving would stop the swarm's training (use --force to leave "
          "anyway)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace skipswarm::node
