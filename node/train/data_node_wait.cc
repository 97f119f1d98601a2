#include "node/train/data_node_wait.h"

#include <glog/logging.h>

#include <optional>
#include <utility>

namespace skipswarm::node {
namespace {

common::BackoffOptions WaitBackoff() {
  common::BackoffOptions o;
  o.initial = DataNodeWait::kInitial;
  o.max = DataNodeWait::kMax;
  return o;
}

}  // namespace

DataNodeWait::DataNodeWait(GroupComm* group, common::Clock* clock, uint64_t seed)
    : group_(group),
      clock_(clock),
      backoff_(WaitBackoff(), seed) {}

DataNodeWait::~DataNodeWait() { Cancel(); }

bool DataNodeWait::Ready(uint64_t iteration, absl::AnyInvocable<void()> retry) {
  // The half of the last retry that did not fire (its timer or its wake).
  Cancel();
  if (group_->HasLiveDataNode(iteration)) {
    std::optional<absl::Duration> waited;
    {
      absl::MutexLock lock(&mu_);
      if (waiting_since_.has_value()) {
        waited = clock_->SteadyNow() - *waiting_since_;
        waiting_since_.reset();
        backoff_.Reset();
      }
    }
    if (!waited.has_value()) return true;
    // Asked outside our lock (the group reads the records), and only when
    // a wait ends: what let the iteration start.
    if (const std::optional<uint64_t> entry = group_->LaterDataNodeEntry(iteration)) {
      LOG(INFO) << "iteration " << iteration << ": passing it empty after waiting " << *waited
                << ": no data node trains in it, and a live data node enters at iteration "
                << *entry << " (Note [Data node entered later])";
    } else {
      LOG(INFO) << "iteration " << iteration << ": a data node is live again after " << *waited
                << " without one; training goes on (Note [Relay without a data node])";
    }
    return true;
  }
  absl::Duration delay;
  auto slot = std::make_shared<Slot>();
  {
    absl::MutexLock lock(&mu_);
    if (!waiting_since_.has_value()) {
      waiting_since_ = clock_->SteadyNow();
      LOG(INFO) << "iteration " << iteration
                << ": no live data node in this node's view; waiting for one instead of "
                   "running empty iterations (asked again at most every "
                << kMax << ", or when the group learns of one: Note [Waking on a data node])";
    }
    delay = backoff_.Next();
    ++retries_;
    {
      absl::MutexLock slot_lock(&slot->mu);
      slot->retry = std::move(retry);
    }
    slot_ = slot;
  }
  // Armed outside the lock (the group's wake may take its own): a Cancel()
  // in between empties the slot, so what is armed here finds nothing to
  // run, and is disarmed below.
  const common::TimerId timer = clock_->RunAfter(delay, [slot] {
    if (absl::AnyInvocable<void()> r = slot->Take()) r();
  });
  const uint64_t wake = group_->WakeOnDataNode([slot] {
    if (absl::AnyInvocable<void()> r = slot->Take()) r();
  });
  {
    absl::MutexLock lock(&mu_);
    if (slot_ == slot) {
      timer_ = timer;
      wake_ = wake;
      return false;
    }
  }
  // Cancelled, or fired and re-armed already, before the ids were stored.
  clock_->Cancel(timer);
  if (wake != 0) group_->CancelDataNodeWake(wake);
  return false;
}

bool DataNodeWait::Cancel() {
  std::shared_ptr<Slot> slot;
  common::TimerId timer;
  uint64_t wake;
  {
    absl::MutexLock lock(&mu_);
    slot = std::move(slot_);
    slot_ = nullptr;
    timer = std::exchange(timer_, common::kNoTimer);
    wake = std::exchange(wake_, 0);
  }
  if (timer != common::kNoTimer) clock_->Cancel(timer);
  if (wake != 0) group_->CancelDataNodeWake(wake);
  // The timer or the wake may be running right now: whichever takes the
  // retry first owns it.
  return slot != nullptr && static_cast<bool>(slot->Take());
}

int64_t DataNodeWait::retries() const {
  absl::MutexLock lock(&mu_);
  return retries_;
}

}  // namespace skipswarm::node
