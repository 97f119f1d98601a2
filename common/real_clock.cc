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

std::unique_ptr<RealClock> RealClock::Create(absl::Duration max_sleep) {
  return std::unique_ptr<RealClock>(new RealClock(max_sleep));
}

RealClock::RealClock(absl::Duration max_sleep) : max_sleep_(max_sleep) {
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
        // Note [Timer thread wake-up]: sleep until `wake` (the earliest
        // deadline, at most max_sleep_ away) unless a timer due before
        // `wake` is scheduled meanwhile. The condition is a state, not an
        // event count. Waiting for "the queue's size changed" missed a timer
        // scheduled while another was cancelled before this thread
        // re-evaluated its condition (size unchanged), and that timer, often
        // a stage server's zero-delay dispatch, waited out the whole 50 ms.
        const absl::Duration now = SteadySinceStart();
        absl::Duration wake = now + max_sleep_;
        if (auto next = timers_.NextDeadline()) wake = std::min(wake, *next);
        auto earlier = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
          if (stopping_) return true;
          auto first = timers_.NextDeadline();
          return first.has_value() && *first < wake;
        };
        mu_.AwaitWithTimeout(absl::Condition(&earlier),
                             std::max(wake - now, absl::ZeroDuration()));
      }
    }
    callback();
  }
}

}  // namespace skipswarm::common
