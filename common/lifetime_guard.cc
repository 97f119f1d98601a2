#include "common/lifetime_guard.h"

#include <algorithm>

namespace skipswarm::common {

void LifetimeGuard::Entry::Leave() {
  if (state_ == nullptr) return;
  {
    absl::MutexLock lock(&state_->mu);
    auto& running = state_->running;
    // Any one of this thread's entries: nested entries on a thread are
    // indistinguishable to Close().
    running.erase(std::find(running.begin(), running.end(), std::this_thread::get_id()));
  }
  state_ = nullptr;
}

LifetimeGuard::Entry LifetimeGuard::Token::Enter() const {
  if (state_ == nullptr) return Entry(nullptr);
  absl::MutexLock lock(&state_->mu);
  if (state_->closed) return Entry(nullptr);
  state_->running.push_back(std::this_thread::get_id());
  return Entry(state_);
}

void LifetimeGuard::Close() {
  State* state = state_.get();
  const std::thread::id self = std::this_thread::get_id();
  absl::MutexLock lock(&state->mu);
  state->closed = true;
  // Callbacks on this thread are the caller's own (it is being destroyed
  // from inside one of them): waiting for them would never end.
  auto only_ours = [state, self]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state->mu) {
    return std::all_of(state->running.begin(), state->running.end(),
                       [self](std::thread::id t) { return t == self; });
  };
  state->mu.Await(absl::Condition(&only_ours));
}

bool LifetimeGuard::closed() const {
  absl::MutexLock lock(&state_->mu);
  return state_->closed;
}

}  // namespace skipswarm::common
