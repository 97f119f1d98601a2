#include "node/train/resync_source.h"

#include <glog/logging.h>

#include <algorithm>
#include <map>
#include <tuple>

namespace skipswarm::node {
namespace {

// Note [Choosing the reference]: how well a digest is supported.
struct Support {
  int trusted = 0;
  int holders = 0;
  common::NodeId lowest;  // its lowest-id holder (digests come ascending)
  bool operator<(const Support& o) const {
    return std::tie(trusted, holders) < std::tie(o.trusted, o.holders);
  }
};

}  // namespace

std::optional<common::NodeId> ResyncSource(
    const std::vector<std::pair<common::NodeId, uint64_t>>& digests, uint64_t mine,
    uint64_t iteration, const std::set<common::NodeId>& on_probation) {
  std::map<uint64_t, Support> support;
  for (const auto& [id, d] : digests) {
    Support& s = support[d];
    if (s.holders == 0 || id < s.lowest) s.lowest = id;
    ++s.holders;
    if (on_probation.count(id) == 0) ++s.trusted;
  }
  if (support.empty()) return std::nullopt;
  Support best;
  for (const auto& [d, s] : support) {
    if (best < s) best = s;
  }
  // Rule 2: this replica keeps a state as well supported as any.
  auto own = support.find(mine);
  if (own != support.end() && !(own->second < best)) return std::nullopt;
  // Rule 3: among the best, the digest whose lowest holder has the lowest id.
  const Support* reference = nullptr;
  uint64_t reference_digest = 0;
  for (const auto& [d, s] : support) {
    if (s < best) continue;
    if (reference == nullptr || s.lowest < reference->lowest) {
      reference = &s;
      reference_digest = d;
    }
  }
  std::vector<common::NodeId> holders;
  for (const auto& [id, d] : digests) {
    if (d == reference_digest && (reference->trusted == 0 || on_probation.count(id) == 0)) {
      holders.push_back(id);
    }
  }
  return holders[iteration % holders.size()];
}

std::optional<common::NodeId> ResyncSource(
    const std::vector<std::pair<common::NodeId, uint64_t>>& digests, uint64_t mine,
    uint64_t iteration, const std::function<bool(const common::NodeId&)>& on_probation) {
  std::set<common::NodeId> newcomers;
  for (const auto& [id, d] : digests) {
    if (on_probation(id)) newcomers.insert(id);
  }
  return ResyncSource(digests, mine, iteration, newcomers);
}

void ResyncChecks::Imported(int stage, const common::NodeId& source) {
  absl::MutexLock lock(&mu_);
  pending_[stage] = source;
}

std::optional<common::NodeId> ResyncChecks::Check(
    uint64_t iteration, int stage,
    const std::vector<std::pair<common::NodeId, uint64_t>>& digests, uint64_t mine) {
  absl::MutexLock lock(&mu_);
  auto p = pending_.find(stage);
  if (p == pending_.end()) return std::nullopt;
  const common::NodeId source = p->second;
  pending_.erase(p);
  auto held = std::find_if(digests.begin(), digests.end(),
                           [&](const auto& d) { return d.first == source; });
  if (held == digests.end() || held->second == mine) return std::nullopt;
  LOG(ERROR) << "iteration " << iteration << " stage " << stage << ": "
             << source.ShortString() << " served a state it does not hold (its digest "
             << held->second << ", the state it served " << mine
             << "); no longer trusted as a re-sync source (Note [Checked re-sync])";
  if (std::find(liars_.begin(), liars_.end(), source) == liars_.end()) {
    liars_.push_back(source);
    if (liars_.size() > kMaxLiars) liars_.pop_front();
  }
  return source;
}

bool ResyncChecks::Distrusted(const common::NodeId& id) const {
  absl::MutexLock lock(&mu_);
  return std::find(liars_.begin(), liars_.end(), id) != liars_.end();
}

}  // namespace skipswarm::node
