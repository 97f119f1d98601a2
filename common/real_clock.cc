#include "common/real_clock.h"

#include <algorithm>
#include <chrono>

namespace skipswarm::common {
namespace {

// The steady clock's epoch is the first call in this process, so steady
// durations stay small and readable in logs.
absl::Duration SteadySinceStart() {
  static const auto start = std::chrono::steady_clock::now();
  return absl::FromChrono(std::chrono::steady_clock::now() - start);
}

}  // namespace

std::unique_ptr<RealClock> RealClock::Create() {
  return std::unique_ptr<RealClock>(new RealClock());
}

RealClock::RealClock() {
  SteadySinceStart();
  thread_ = std::thread([this] { TimerLoop(); });
}

RealClock::~RealClock() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

absl::Time RealClock::Now() { return absl::Now(); }

absl::Duration RealClock::SteadyNow() { return SteadySinceStart(); }

TimerId RealClock::RunAt(absl::Duration deadline, Callback callback) {
  absl::MutexLock lock(&mu_);
  return timers_.Add(deadline, std::move(callback));
}

bool RealClock::Cancel(TimerId id) {
  absl::MutexLock lock(&mu_);
  return timers_.Remove(id);
}

std::chrono::system_clock::time_point SystemDeadlineAfter(absl::Duration delay) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(
             absl::ToChronoNanoseconds(delay));
}

void RealClock::SleepFor(absl::Duration delay) { absl::SleepFor(delay); }

void RealClock::TimerLoop() {
  for (;;) {
    Callback callback;
    {
      absl::MutexLock lock(&mu_);
      for (;;) {
        if (stopping_) return;
        auto due = timers_.PopDue(SteadySinceStart());
        if (due) {
          callback = std::move(*due);
          break;
        }
        auto next = timers_.NextDeadline();
        // Wake on the next deadline, on a new (possibly earlier) timer, or on
        // shutdown; re-check at least every 50 ms to bound wake-up error.
        absl::Duration wait = absl::Milliseconds(50);
        if (next) wait = std::min(wait, *next - SteadySinceStart());
        size_t before = timers_.size();
        auto changed = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
          return stopping_ || timers_.size() != before;
        };
        mu_.AwaitWithTimeout(absl::Condition(&changed),
                             std::max(wait, absl::ZeroDuration()));
      }
    }
    callback();
  }
}

}  // namespace skipswarm::common
