#include "node/daemon/gossip/orphan_restore.h"

#include <algorithm>

namespace skipswarm::node {

OrphanRestorePlan::OrphanRestorePlan(const std::vector<int>& orphaned) {
  for (int s : orphaned) stages_[s];
}

void OrphanRestorePlan::AddOwn(int stage, int64_t step) {
  auto it = stages_.find(stage);
  if (it == stages_.end() || step <= 0) return;
  OrphanRestore& r = it->second;
  const uint64_t at = static_cast<uint64_t>(step);
  // A tie keeps ours (Note [Newest state wins]).
  if (r.found && at < r.iteration) return;
  r.found = true;
  r.own = true;
  r.iteration = at;
  r.holders.clear();
}

void OrphanRestorePlan::AddHeld(const StateSource& holder,
                                const std::vector<std::pair<int, uint64_t>>& held) {
  for (const auto& [stage, iteration] : held) {
    auto it = stages_.find(stage);
    if (it == stages_.end()) continue;
    OrphanRestore& r = it->second;
    if (r.found && (iteration < r.iteration || (r.own && iteration == r.iteration))) continue;
    if (!r.found || iteration > r.iteration) {
      r.found = true;
      r.own = false;
      r.iteration = iteration;
      r.holders.clear();
    }
    // One entry per holder (a holder listing the same copy twice is asked once).
    const bool listed = std::any_of(r.holders.begin(), r.holders.end(), [&](const StateSource& h) {
      return h.address == holder.address && h.id == holder.id;
    });
    if (!listed) r.holders.push_back(holder);
  }
}

std::optional<int> OrphanRestorePlan::Missing() const {
  for (const auto& [stage, r] : stages_) {
    if (!r.found) return stage;
  }
  return std::nullopt;
}

uint64_t OrphanRestorePlan::Newest() const {
  uint64_t newest = 0;
  for (const auto& [stage, r] : stages_) newest = std::max(newest, r.iteration);
  return newest;
}

}  // namespace skipswarm::node
