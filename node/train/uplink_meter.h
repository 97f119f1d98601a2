// UplinkMeter and UploadPacer: GrpcGroupComm's view of its own uplink.
// UplinkMeter measures it (Note [Uplink figure] in grpc_group.h); UploadPacer
// emulates a slower one (GrpcGroupOptions::max_upload_bytes_per_second).
//
//   meter.Begin(now); ...push...; meter.End(now, bytes, ok);
//   uint64_t figure = meter.Take();               // bytes/s, 0 = unknown
//   clock->RunAfter(pacer.Reserve(bytes, now), write_chunk);
//
// Thread rule: both are thread-safe.
#ifndef SKIPSWARM_NODE_TRAIN_UPLINK_METER_H_
#define SKIPSWARM_NODE_TRAIN_UPLINK_METER_H_

#include <algorithm>
#include <cstdint>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace skipswarm::node {

// Gradient bytes pushed over the time at least one push was in flight.
class UplinkMeter {
 public:
  void Begin(absl::Duration now) {
    absl::MutexLock lock(&mu_);
    if (active_++ == 0) busy_since_ = now;
  }
  void End(absl::Duration now, uint64_t bytes, bool ok) {
    absl::MutexLock lock(&mu_);
    if (--active_ == 0) busy_ += now - busy_since_;
    if (ok) bytes_ += bytes;
  }
  // Bytes/s, smoothed; 0 until 256 KiB have been pushed.
  uint64_t Take() {
    absl::MutexLock lock(&mu_);
    if (bytes_ >= (uint64_t{1} << 18) && busy_ > absl::ZeroDuration()) {
      const double sample = static_cast<double>(bytes_) / absl::ToDoubleSeconds(busy_);
      estimate_ = estimate_ == 0 ? sample : 0.5 * estimate_ + 0.5 * sample;
      bytes_ = 0;
      busy_ = absl::ZeroDuration();
    }
    return static_cast<uint64_t>(std::min(estimate_, 1e18));
  }

 private:
  absl::Mutex mu_;
  int active_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration busy_since_ ABSL_GUARDED_BY(mu_);
  absl::Duration busy_ ABSL_GUARDED_BY(mu_);
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  double estimate_ ABSL_GUARDED_BY(mu_) = 0;
};

// Chunks take back-to-back slots of the uplink; a chunk is written when
// its slot ends (store and forward, like a link of that bandwidth).
class UploadPacer {
 public:
  explicit UploadPacer(double bytes_per_second) : rate_(bytes_per_second) {}
  // How long a chunk of `bytes` waits at `now` before it is written.
  absl::Duration Reserve(uint64_t bytes, absl::Duration now) {
    absl::MutexLock lock(&mu_);
    next_ = std::max(next_, now) + absl::Seconds(static_cast<double>(bytes) / rate_);
    return next_ - now;
  }

 private:
  const double rate_;
  absl::Mutex mu_;
  absl::Duration next_ ABSL_GUARDED_BY(mu_);
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_UPLINK_METER_H_
