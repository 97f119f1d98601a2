// Backoff: the delays of a retry loop, growing geometrically to a cap, each
// with random jitter, so a swarm of nodes that failed together does not
// retry together. LogLimiter: lets one of many repeated log lines through
// per interval, counting the ones it held back.
//
//   common::Backoff backoff(common::BackoffOptions{}, /*seed=*/7);
//   clock->RunAfter(backoff.Next(), retry);   // 100 ms, ~200 ms, ... <= 10 s
//   backoff.Reset();                          // after a success
//
//   common::LogLimiter limit(absl::Seconds(10));
//   if (int64_t held = 0; limit.Allow(clock->SteadyNow(), &held))
//     LOG(WARNING) << "dropped (" << held << " more not shown)";
//
// Time comes from the caller (an injected clock), randomness from a seed:
// both are deterministic under a SimClock.
//
// Thread rule: thread-compatible (one owner, or external locking).
#ifndef SKIPSWARM_COMMON_BACKOFF_H_
#define SKIPSWARM_COMMON_BACKOFF_H_

#include <cstdint>
#include <utility>

#include "absl/time/time.h"
#include "common/random.h"

namespace skipswarm::common {

struct BackoffOptions {
  absl::Duration initial = absl::Milliseconds(100);
  absl::Duration max = absl::Seconds(10);
  double multiplier = 2.0;
  // Each delay is drawn uniformly from [d * (1 - jitter), d].
  double jitter = 0.5;
};

class Backoff {
 public:
  Backoff(BackoffOptions options, uint64_t seed);

  // The next delay; each call grows the base delay up to `max`.
  absl::Duration Next();
  // Back to `initial` (after a success).
  void Reset();
  // Delays handed out since the last Reset.
  int attempts() const { return attempts_; }

 private:
  BackoffOptions options_;
  Random rng_;
  absl::Duration base_;
  int attempts_ = 0;
};

class LogLimiter {
 public:
  // `burst` (>= 1): how many first calls are let through before the pacing.
  explicit LogLimiter(absl::Duration interval, int burst = 1)
      : interval_(interval), burst_(burst < 1 ? 1 : burst) {}

  // True for the first `burst` calls and then at most once per interval;
  // `held` (may be null) gets the number of calls refused since the last
  // true.
  bool Allow(absl::Duration now, int64_t* held);
  // Counts a line held back for a reason outside this limiter (it is
  // reported in `held` by the next true).
  void Hold() { ++held_; }
  // Calls refused since the last true.
  int64_t held() const { return held_; }
  // A summary of the held-back calls, as the line Allow would show at `now`
  // (Note [Paced peer logs]): their count, reset, once the interval since
  // the last true has passed; 0 (nothing changed) before, or when none are
  // held.
  int64_t TakeDueHeld(absl::Duration now);
  // The held-back count, reset, whenever (a final flush).
  int64_t TakeHeld() { return std::exchange(held_, 0); }

 private:
  const absl::Duration interval_;
  const int burst_;
  int shown_ = 0;  // saturates at burst_
  absl::Duration last_;
  int64_t held_ = 0;
};

}  // namespace skipswarm::common

#endif  // SKIPSWARM_COMMON_BACKOFF_H_
