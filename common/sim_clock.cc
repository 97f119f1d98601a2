#include "common/sim_clock.h"

#include <algorithm>

namespace skipswarm::common {

SimClock::SimClock(absl::Time wall_epoch) : wall_epoch_(wall_epoch) {}

absl::Time SimClock::Now() {
  absl::MutexLock lock(&mu_);
  return wall_epoch_ + now_;
}

absl::Duration SimClock::SteadyNow() {
  absl::MutexLock lock(&mu_);
  return now_;
}

TimerId SimClock::RunAt(absl::Duration deadline, Callback callback) {
  absl::MutexLock lock(&mu_);
  return timers_.Add(std::max(deadline, now_), std::move(callback));
}

bool SimClock::Cancel(TimerId id) {
  absl::MutexLock lock(&mu_);
  return timers_.Remove(id);
}

void SimClock::Advance(absl::Duration delta) {
  absl::Duration target;
  {
    absl::MutexLock lock(&mu_);
    target = now_ + std::max(delta, absl::ZeroDuration());
  }
  AdvanceTo(target);
}

void SimClock::AdvanceTo(absl::Duration deadline) {
  FireUntil(deadline);
  absl::MutexLock lock(&mu_);
  now_ = std::max(now_, deadline);
}

bool SimClock::RunNext() {
  absl::Duration next;
  {
    absl::MutexLock lock(&mu_);
    auto deadline = timers_.NextDeadline();
    if (!deadline) return false;
    next = *deadline;
  }
  AdvanceTo(next);
  return true;
}

void SimClock::RunDue() {
  absl::Duration now;
  {
    absl::MutexLock lock(&mu_);
    now = now_;
  }
  FireUntil(now);
}

size_t SimClock::pending_timers() {
  absl::MutexLock lock(&mu_);
  return timers_.size();
}

absl::Duration SimClock::next_deadline_or(absl::Duration fallback) {
  absl::MutexLock lock(&mu_);
  return timers_.NextDeadline().value_or(fallback);
}

void SimClock::FireUntil(absl::Duration until) {
  for (;;) {
    Callback callback;
    {
      absl::MutexLock lock(&mu_);
      auto next = timers_.NextDeadline();
      if (!next || *next > until) return;
      now_ = std::max(now_, *next);
      callback = std::move(*timers_.PopDue(now_));
    }
    callback();  // no lock held: the callback may use the clock
  }
}

}  // namespace skipswarm::common
