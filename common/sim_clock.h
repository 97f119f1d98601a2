// A deterministic clock for tests and the simulator: time moves only when
// the owner advances it, and due timers fire in (deadline, scheduling order).
//
//   SimClock clock;                       // SteadyNow() == 0, Now() == epoch
//   clock.RunAfter(absl::Seconds(1), cb);
//   clock.Advance(absl::Seconds(5));      // cb runs with SteadyNow() == 1s
//
// During Advance, time jumps to each due timer's deadline before its callback
// runs, so a callback sees the time it was scheduled for, and a timer that a
// callback schedules inside the advanced window also fires in this Advance.
//
// Thread rule: thread-safe; callbacks run on the advancing thread with no
// lock held. Advance must not be called from inside a timer callback.
#ifndef SKIPSWARM_COMMON_SIM_CLOCK_H_
#define SKIPSWARM_COMMON_SIM_CLOCK_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/timer_queue.h"

namespace skipswarm::common {

class SimClock final : public Clock {
 public:
  // `wall_epoch` is what Now() returns while SteadyNow() is zero.
  explicit SimClock(absl::Time wall_epoch = absl::UnixEpoch());

  absl::Time Now() override;
  absl::Duration SteadyNow() override;
  TimerId RunAt(absl::Duration deadline, Callback callback) override;
  bool Cancel(TimerId id) override;

  // Moves time forward by `delta`, firing every timer due on the way.
  void Advance(absl::Duration delta);
  // Moves time to `deadline` (no-op if it is in the past), firing due timers.
  void AdvanceTo(absl::Duration deadline);
  // Jumps to the next pending timer and fires everything due then. Returns
  // false (and leaves time alone) when no timer is pending.
  bool RunNext();
  // Fires timers that are already due without moving time.
  void RunDue();

  size_t pending_timers();
  absl::Duration next_deadline_or(absl::Duration fallback);

 private:
  // Pops and runs due timers until none is due at `until`; time follows
  // each timer's deadline.
  void FireUntil(absl::Duration until);

  absl::Mutex mu_;
  absl::Time wall_epoch_;
  absl::Duration now_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  TimerQueue timers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace skipswarm::common

#endif  // SKIPSWARM_COMMON_SIM_CLOCK_H_
