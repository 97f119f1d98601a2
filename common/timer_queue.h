// An ordered set of pending timers, shared by RealClock and SimClock so both
// fire in exactly the same order: by deadline, then by scheduling order.
//
// Thread rule: not thread-safe; the owning clock guards it with its mutex.
#ifndef SKIPSWARM_COMMON_TIMER_QUEUE_H_
#define SKIPSWARM_COMMON_TIMER_QUEUE_H_

#include <map>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace skipswarm::common {

class TimerQueue {
 public:
  // Adds a timer and returns its id (never kNoTimer).
  TimerId Add(absl::Duration deadline, Clock::Callback callback);

  // Removes a pending timer; false if it is not pending.
  bool Remove(TimerId id);

  // The earliest deadline, if any timer is pending.
  std::optional<absl::Duration> NextDeadline() const;

  // Removes and returns the earliest timer if its deadline is <= `now`.
  std::optional<Clock::Callback> PopDue(absl::Duration now);

  bool empty() const { return by_order_.empty(); }
  size_t size() const { return by_order_.size(); }

 private:
  using Key = std::pair<absl::Duration, TimerId>;  // ids grow: FIFO on ties
  std::map<Key, Clock::Callback> by_order_;
  absl::flat_hash_map<TimerId, absl::Duration> deadline_of_;
  TimerId next_id_ = 1;
};

}  // namespace skipswarm::common

#endif  // SKIPSWARM_COMMON_TIMER_QUEUE_H_
