#include "node/train/sdp_shadows.h"

#include <glog/logging.h>

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"

namespace skipswarm::node {

struct SdpShadowStages::Pass {
  uint64_t iteration = 0;
  absl::Status first_error;
  int64_t bytes = 0;
  absl::AnyInvocable<void(absl::Status)> done;
};

SdpShadowStages::SdpShadowStages(common::NodeId self, std::map<int, StageCompute*> shadows,
                                 const SwarmView* view, GroupComm* group)
    : self_(self), shadows_(std::move(shadows)), view_(view), group_(group) {}

SdpShadowStages::~SdpShadowStages() { guard_.Close(); }

ShadowStats SdpShadowStages::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void SdpShadowStages::Refresh(uint64_t iteration, absl::AnyInvocable<void(absl::Status)> done) {
  auto pass = std::make_shared<Pass>();
  pass->iteration = iteration;
  pass->done = std::move(done);
  Next(std::move(pass), shadows_.begin());
}

void SdpShadowStages::Next(std::shared_ptr<Pass> pass,
                           std::map<int, StageCompute*>::const_iterator it) {
  if (it == shadows_.end()) {
    {
      absl::MutexLock lock(&mu_);
      int64_t oldest = 0;
      for (const auto& [stage, c] : shadows_) {
        auto f = fresh_at_.find(stage);
        oldest = std::max<int64_t>(
            oldest, f == fresh_at_.end() ? static_cast<int64_t>(pass->iteration)
                                         : static_cast<int64_t>(pass->iteration - f->second));
      }
      stats_.staleness = oldest;
      stats_.max_staleness = std::max(stats_.max_staleness, oldest);
      stats_.last_bytes = pass->bytes;
    }
    return pass->done(pass->first_error);
  }
  const int stage = it->first;
  std::vector<common::NodeId> hosts = view_->Replicas(stage);
  hosts.erase(std::remove(hosts.begin(), hosts.end(), self_), hosts.end());
  if (hosts.empty()) {
    absl::Status s = absl::UnavailableError(
        absl::StrCat("no live host of stage ", stage, " to refresh its frozen copy from"));
    {
      absl::MutexLock lock(&mu_);
      ++stats_.failures;
    }
    if (pass->first_error.ok()) pass->first_error = s;
    return Next(std::move(pass), std::next(it));
  }
  group_->FetchState(
      pass->iteration, stage, hosts.front(),
      guard_.Wrap([this, pass, it, stage](absl::StatusOr<std::string> state) mutable {
        absl::StatusOr<int64_t> imported =
            state.ok() ? it->second->ImportState(*state) : absl::StatusOr<int64_t>(state.status());
        {
          absl::MutexLock lock(&mu_);
          if (imported.ok()) {
            ++stats_.refreshes;
            stats_.bytes += static_cast<int64_t>(state->size());
            pass->bytes += static_cast<int64_t>(state->size());
            fresh_at_[stage] = pass->iteration;
          } else {
            ++stats_.failures;
          }
        }
        if (!imported.ok()) {
          LOG(WARNING) << "iteration " << pass->iteration << ": frozen stage " << stage
                       << " not refreshed: " << imported.status();
          if (pass->first_error.ok()) pass->first_error = imported.status();
        }
        Next(std::move(pass), std::next(it));
      }));
}

}  // namespace skipswarm::node
