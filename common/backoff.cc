#include "common/backoff.h"

#include <algorithm>
#include <utility>

namespace skipswarm::common {

Backoff::Backoff(BackoffOptions options, uint64_t seed)
    : options_(options), rng_(seed), base_(options.initial) {
  if (options_.initial <= absl::ZeroDuration()) options_.initial = absl::Milliseconds(1);
  if (options_.max < options_.initial) options_.max = options_.initial;
  if (!(options_.multiplier >= 1.0)) options_.multiplier = 1.0;
  options_.jitter = std::clamp(options_.jitter, 0.0, 1.0);
  base_ = options_.initial;
}

absl::Duration Backoff::Next() {
  const absl::Duration d = base_ * (1.0 - options_.jitter * rng_.UniformDouble());
  base_ = std::min(options_.max, base_ * options_.multiplier);
  ++attempts_;
  return d;
}

void Backoff::Reset() {
  base_ = options_.initial;
  attempts_ = 0;
}

bool LogLimiter::Allow(absl::Duration now, int64_t* held) {
  if (shown_ >= burst_ && now - last_ < interval_) {
    ++held_;
    return false;
  }
  if (shown_ < burst_) ++shown_;
  last_ = now;
  if (held != nullptr) *held = held_;
  held_ = 0;
  return true;
}

int64_t LogLimiter::TakeDueHeld(absl::Duration now) {
  if (held_ == 0 || now - last_ < interval_) return 0;
  last_ = now;
  return std::exchange(held_, 0);
}

}  // namespace skipswarm::common
