#include "node/daemon/reporting/speed_reports.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace skipswarm::node {

ComputeSpeedMeter::ComputeSpeedMeter(ComputeSpeedOptions options) : options_(options) {}

void ComputeSpeedMeter::Observe(bool backward, absl::Duration elapsed) {
  const double work = static_cast<double>(std::max(1, options_.layers_per_stage)) *
                      std::max(1, options_.samples_per_mb) * (backward ? 1.5 : 1.0);
  const double sample = absl::ToDoubleSeconds(elapsed) / work;
  if (!(sample > 0) || !std::isfinite(sample)) return;
  absl::MutexLock lock(&mu_);
  estimate_ = samples_ == 0 ? sample : options_.alpha * sample + (1 - options_.alpha) * estimate_;
  ++samples_;
}

double ComputeSpeedMeter::estimate() const {
  absl::MutexLock lock(&mu_);
  return estimate_;
}

std::optional<double> ComputeSpeedMeter::TakePublishable(absl::Duration now) {
  absl::MutexLock lock(&mu_);
  if (samples_ < options_.min_samples) return std::nullopt;
  if (published_ > 0 &&
      (std::abs(estimate_ - published_) <= options_.republish_change * published_ ||
       now - published_at_ < options_.min_republish_interval)) {
    return std::nullopt;
  }
  published_ = estimate_;
  published_at_ = now;
  return estimate_;
}

LinkTimingTransport::LinkTimingTransport(Transport* inner, common::Clock* clock,
                                         HopReport report)
    : ForwardingTransport(inner), clock_(clock), report_(std::move(report)) {}

void LinkTimingTransport::Send(const PeerId& to, Frame frame, SendDone done) {
  const uint64_t bytes = frame.payload.size();
  const absl::Duration sent = clock_->SteadyNow();
  // By value: an ack may come while this wrapper is being torn down.
  inner()->Send(to, std::move(frame),
               [clock = clock_, report = report_, to, bytes, sent,
                done = std::move(done)](absl::Status ack) mutable {
                 if (ack.ok() && report) report(to, bytes, clock->SteadyNow() - sent);
                 done(std::move(ack));
               });
}

}  // namespace skipswarm::node
