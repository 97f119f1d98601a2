#include "node/daemon/gossip/behind_check.h"

#include <utility>

namespace skipswarm::node {

BehindCheck::BehindCheck(BehindCheckOptions options, common::Clock* clock)
    : options_(std::move(options)), clock_(clock) {}

std::optional<uint64_t> BehindCheck::Poll(uint64_t own, const Query& query) {
  const absl::Duration now = clock_->SteadyNow();
  if (asked_ && now - last_ < options_.every) return std::nullopt;
  asked_ = true;
  last_ = now;
  std::optional<uint64_t> highest;
  for (const absl::StatusOr<uint64_t>& it : query()) {
    if (it.ok() && (!highest.has_value() || *it > *highest)) highest = *it;
  }
  if (highest.has_value() && *highest > own + options_.lead) return highest;
  return std::nullopt;
}

}  // namespace skipswarm::node
