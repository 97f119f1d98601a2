// The production clock: system wall time, a monotonic steady clock, and one
// timer thread that runs due callbacks in (deadline, scheduling order).
//
//   auto clock = common::RealClock::Create();
//   clock->RunAfter(absl::Milliseconds(500), [] { LOG(INFO) << "tick"; });
//
// Thread rule: thread-safe. Callbacks run one at a time on the clock's timer
// thread with no lock held; a slow callback delays the timers behind it, so
// callbacks should hand long work to their own threads. The destructor
// cancels pending timers and joins the timer thread; it must not run on the
// timer thread itself.
#ifndef SKIPSWARM_COMMON_REAL_CLOCK_H_
#define SKIPSWARM_COMMON_REAL_CLOCK_H_

#include <chrono>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/timer_queue.h"

namespace skipswarm::common {

class RealClock final : public Clock {
 public:
  // The timer thread sleeps until the earliest deadline or until an earlier
  // timer is scheduled (Note [Timer thread wake-up] in real_clock.cc), and
  // at most `max_sleep` at a time: a safety net that timely firing does not
  // depend on (tests pass an hour to prove it).
  static std::unique_ptr<RealClock> Create(
      absl::Duration max_sleep = absl::Milliseconds(50));
  ~RealClock() override;

  absl::Time Now() override;
  absl::Duration SteadyNow() override;
  TimerId RunAt(absl::Duration deadline, Callback callback) override;
  bool Cancel(TimerId id) override;

  // Blocks the calling thread for `delay`. For `main`-level loops and tools
  // only: library code schedules a timer instead.
  void SleepFor(absl::Duration delay);

 private:
  explicit RealClock(absl::Duration max_sleep);
  void TimerLoop();

  const absl::Duration max_sleep_;
  absl::Mutex mu_;
  TimerQueue timers_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// A deadline `delay` from now on the system clock, for the APIs whose
// deadlines are real time by nature (gRPC ClientContext / Server::Shutdown).
// Code with an injected Clock uses it for everything else.
std::chrono::system_clock::time_point SystemDeadlineAfter(absl::Duration delay);

}  // namespace skipswarm::common

#endif  // SKIPSWARM_COMMON_REAL_CLOCK_H_
