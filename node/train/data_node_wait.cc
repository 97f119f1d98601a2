#include "node/train/data_node_wait.h"

#include <glog/logging.h>

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

bool DataNodeWait::Ready(uint64_t iteration, absl::AnyInvocable<void()> retry) {
  const bool live = group_->HasLiveDataNode(iteration);
  absl::Duration delay;
  {
    absl::MutexLock lock(&mu_);
    timer_ = common::kNoTimer;
    if (live) {
      if (waiting_since_.has_value()) {
        LOG(INFO) << "iteration " << iteration << ": a data node is live again after "
                  << clock_->SteadyNow() - *waiting_since_
                  << " without one; training goes on (Note [Relay without a data node])";
        waiting_since_.reset();
        backoff_.Reset();
      }
      return true;
    }
    if (!waiting_since_.has_value()) {
      waiting_since_ = clock_->SteadyNow();
      LOG(INFO) << "iteration " << iteration
                << ": no live data node in this node's view; waiting for one instead of "
                   "running empty iterations (asked again at most every "
                << kMax << ", Note [Relay without a data node])";
    }
    delay = backoff_.Next();
    ++retries_;
  }
  // Armed outside the lock: a Cancel() in between finds no timer and
  // returns false, and the retry then sees the stop itself.
  const common::TimerId id = clock_->RunAfter(delay, std::move(retry));
  absl::MutexLock lock(&mu_);
  timer_ = id;
  return false;
}

bool DataNodeWait::Cancel() {
  common::TimerId id;
  {
    absl::MutexLock lock(&mu_);
    id = timer_;
    timer_ = common::kNoTimer;
  }
  return id != common::kNoTimer && clock_->Cancel(id);
}

int64_t DataNodeWait::retries() const {
  absl::MutexLock lock(&mu_);
  return retries_;
}

}  // namespace skipswarm::node
