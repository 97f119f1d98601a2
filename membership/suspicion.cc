#include "membership/suspicion.h"

#include <algorithm>
#include <cmath>

namespace skipswarm::membership {

SuspicionBounds ComputeSuspicionBounds(absl::Duration base,
                                       double max_multiplier,
                                       int confirmations, int live_members) {
  SuspicionBounds b;
  b.min = base * std::max(1.0, std::log10(std::max(live_members, 1)));
  b.max = b.min * std::max(1.0, max_multiplier);
  b.confirmations = live_members - 2 < confirmations ? 0 : confirmations;
  return b;
}

absl::Duration SuspicionTimeout(const SuspicionBounds& bounds, int c) {
  if (bounds.confirmations <= 0) return bounds.min;
  c = std::clamp(c, 0, bounds.confirmations);
  const double frac =
      std::log(c + 1.0) / std::log(bounds.confirmations + 1.0);
  return std::max(bounds.min, bounds.max - (bounds.max - bounds.min) * frac);
}

Suspicion::Suspicion(const common::NodeId& first_reporter,
                     absl::Duration start, SuspicionBounds bounds)
    : first_reporter_(first_reporter), start_(start), bounds_(bounds) {}

bool Suspicion::HasReporter(const common::NodeId& reporter) const {
  return reporter.IsZero() || reporter == first_reporter_ ||
         confirmations() >= bounds_.confirmations ||
         std::find(confirmers_.begin(), confirmers_.end(), reporter) !=
             confirmers_.end();
}

bool Suspicion::Confirm(const common::NodeId& reporter) {
  if (HasReporter(reporter)) return false;
  confirmers_.push_back(reporter);
  return true;
}

void Suspicion::HeardFromSuspect(absl::Duration at) {
  heard_ = std::max(heard_, at);
}

absl::Duration Suspicion::Deadline() const {
  const absl::Duration deadline = start_ + Timeout();
  if (heard_ == -absl::InfiniteDuration()) return deadline;
  return std::max(deadline, std::min(heard_ + bounds_.min, start_ + bounds_.max));
}

}  // namespace skipswarm::membership
