// A byte-rate token bucket on caller-supplied time (GCRA form), used to
// emulate link and uplink/downlink bandwidth. Time comes from the caller
// (the injected clock), so it behaves the same on SimClock and RealClock.
//
//   TokenBucket link(10e6, 64 << 10);               // 10 MB/s, 64 KiB burst
//   absl::Duration done = link.Reserve(now, 10'000'000);   // ≈ now + 0.993 s
//
// Reserve queues transfers back to back: a transfer that starts while the
// bucket is busy finishes `bytes / rate` after the previous one.
//
// Thread rule: thread-compatible (the owner locks).
#ifndef SKIPSWARM_NODE_TRANSPORT_TOKEN_BUCKET_H_
#define SKIPSWARM_NODE_TRANSPORT_TOKEN_BUCKET_H_

#include <algorithm>
#include <cstdint>

#include "absl/time/time.h"

namespace skipswarm::node {

class TokenBucket {
 public:
  // `bytes_per_second` <= 0 means unlimited.
  TokenBucket(double bytes_per_second = 0, uint64_t burst_bytes = 64 << 10)
      : rate_(bytes_per_second),
        burst_(rate_ > 0 ? absl::Seconds(burst_bytes / rate_)
                         : absl::ZeroDuration()) {}

  bool unlimited() const { return rate_ <= 0; }
  double bytes_per_second() const { return rate_; }

  // Takes `bytes` starting at `now`; returns when the last of them has
  // passed the bucket (>= now).
  absl::Duration Reserve(absl::Duration now, uint64_t bytes) {
    if (unlimited()) return now;
    tat_ = std::max(tat_, now) + absl::Seconds(static_cast<double>(bytes) / rate_);
    return std::max(now, tat_ - burst_);
  }

 private:
  double rate_;
  absl::Duration burst_;
  // Theoretical arrival time: when the bucket is full again.
  absl::Duration tat_ = absl::ZeroDuration();
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRANSPORT_TOKEN_BUCKET_H_
