// The one seam through which SkipSwarm reads time and schedules work later.
//
// Every module takes a `Clock*`; only `main` (RealClock) and tests or the
// simulator (SimClock) choose the implementation. Nothing outside common/
// calls std::chrono::*::now(), absl::Now() or sleeps.
//
//   common::SimClock clock;
//   clock.RunAfter(absl::Seconds(2), [&] { fired = true; });
//   clock.Advance(absl::Seconds(2));   // runs the callback, deterministically
//
// Thread rule: all methods are thread-safe. Timer callbacks never run while a
// clock lock is held, so a callback may call back into the clock (schedule or
// cancel timers).
#ifndef SKIPSWARM_COMMON_CLOCK_H_
#define SKIPSWARM_COMMON_CLOCK_H_

#include <cstdint>

#include "absl/functional/any_invocable.h"
#include "absl/time/time.h"

namespace skipswarm::common {

// Identifies a scheduled timer. 0 is never a valid id.
using TimerId = uint64_t;
inline constexpr TimerId kNoTimer = 0;

class Clock {
 public:
  using Callback = absl::AnyInvocable<void()>;

  virtual ~Clock() = default;

  // Wall-clock time: for logs, signed records and reports. May jump.
  virtual absl::Time Now() = 0;

  // Monotonic time since an arbitrary, clock-specific epoch. Use it for
  // durations, deadlines and timers. Never decreases.
  virtual absl::Duration SteadyNow() = 0;

  // Runs `callback` once SteadyNow() >= `deadline` (immediately-due timers
  // still run asynchronously, never inside RunAt). Timers due at the same
  // instant run in the order they were scheduled.
  virtual TimerId RunAt(absl::Duration deadline, Callback callback) = 0;

  // Cancels a pending timer. Returns true if the callback will now never run;
  // false if it already ran, is running right now, or `id` is unknown.
  // Does not wait for a running callback to finish.
  virtual bool Cancel(TimerId id) = 0;

  // Runs `callback` after `delay` (negative delays count as zero).
  TimerId RunAfter(absl::Duration delay, Callback callback) {
    if (delay < absl::ZeroDuration()) delay = absl::ZeroDuration();
    return RunAt(SteadyNow() + delay, std::move(callback));
  }
};

}  // namespace skipswarm::common

#endif  // SKIPSWARM_COMMON_CLOCK_H_
