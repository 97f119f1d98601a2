#include "common/timer_queue.h"

namespace skipswarm::common {

TimerId TimerQueue::Add(absl::Duration deadline, Clock::Callback callback) {
  TimerId id = next_id_++;
  by_order_.emplace(Key{deadline, id}, std::move(callback));
  deadline_of_.emplace(id, deadline);
  return id;
}

bool TimerQueue::Remove(TimerId id) {
  auto it = deadline_of_.find(id);
  if (it == deadline_of_.end()) return false;
  by_order_.erase(Key{it->second, id});
  deadline_of_.erase(it);
  return true;
}

std::optional<absl::Duration> TimerQueue::NextDeadline() const {
  if (by_order_.empty()) return std::nullopt;
  return by_order_.begin()->first.first;
}

std::optional<Clock::Callback> TimerQueue::PopDue(absl::Duration now) {
  if (by_order_.empty()) return std::nullopt;
  auto first = by_order_.begin();
  if (first->first.first > now) return std::nullopt;
  Clock::Callback callback = std::move(first->second);
  deadline_of_.erase(first->first.second);
  by_order_.erase(first);
  return callback;
}

}  // namespace skipswarm::common
