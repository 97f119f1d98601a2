#include "node/train/silent_loss_tracker.h"

#include <algorithm>
#include <cmath>

namespace skipswarm::node {

common::BackoffOptions DefaultExclusionBackoff() {
  common::BackoffOptions o;
  o.initial = absl::Seconds(30);
  o.max = absl::Minutes(10);
  o.multiplier = 2.0;
  o.jitter = 0.5;
  return o;
}

std::vector<SilentLossTracker::Exclusion> SilentLossTracker::EndIteration(
    const absl::flat_hash_set<common::NodeId>& lost,
    const absl::flat_hash_set<common::NodeId>& completed, absl::Duration now,
    const NothingCompleted& nothing) {
  std::vector<Exclusion> out;
  ++iterations_;
  if (options_.iterations_to_exclude <= 0) return out;
  std::vector<common::NodeId> suspects;
  if (completed.empty()) {
    // Note [Nothing completed]: the first relay every lost route shares,
    // unless one of them could not be planned around.
    const std::vector<common::NodeId>& shared = nothing.on_every_lost_route;
    if (shared.empty()) return out;
    for (const common::NodeId& id : shared) {
      if (nothing.last_replicas.contains(id)) return out;
    }
    suspects.push_back(shared.front());
  } else {
    // A completed MB through a relay clears it: its back-off starts over.
    for (const common::NodeId& id : completed) relays_.erase(id);
    for (const common::NodeId& id : lost) {
      if (!completed.contains(id)) suspects.push_back(id);
    }
  }
  // Ascending id, so that the back-off seeds do not depend on hash order.
  std::sort(suspects.begin(), suspects.end());
  for (const common::NodeId& id : suspects) {
    auto it = relays_.find(id);
    if (it == relays_.end()) {
      it = relays_.try_emplace(id, options_.backoff, seed_ + seeds_++).first;
    }
    Relay& r = it->second;
    // An MB planned before the exclusion began says nothing new.
    if (Excluded(r, now)) continue;
    ++r.streak;
    // Note [Silent relay exclusion]: once convicted, one suspect iteration
    // after the back-off is enough for the next, longer one.
    if (!r.convicted && r.streak < options_.iterations_to_exclude) continue;
    const absl::Duration d = r.backoff.Next();
    r.until = now + d;
    if (options_.min_iterations > 0) {  // Note [Exclusion in iterations]
      const double cap =
          std::max(1.0, absl::FDivDuration(options_.backoff.max, options_.backoff.initial));
      const double doublings =
          std::min(std::ldexp(1.0, std::min(r.backoff.attempts() - 1, 30)), cap);
      r.until_iteration = iterations_ + static_cast<int64_t>(options_.min_iterations * doublings);
    }
    r.streak = 0;
    r.convicted = true;
    out.push_back({id, d, r.backoff.attempts()});
  }
  return out;
}

std::vector<common::NodeId> SilentLossTracker::ExcludedAt(absl::Duration now) const {
  std::vector<common::NodeId> out;
  for (const auto& [id, r] : relays_) {
    if (Excluded(r, now)) out.push_back(id);  // std::map: ascending id
  }
  return out;
}

bool SilentLossTracker::Excluded(const Relay& r, absl::Duration now) const {
  return now < r.until || iterations_ < r.until_iteration;
}

absl::flat_hash_set<common::NodeId> LastReplicas(
    const SwarmView& planning, const absl::flat_hash_set<common::NodeId>& relays) {
  absl::flat_hash_set<common::NodeId> out;
  if (relays.empty()) return out;
  const PipelineHostsView hosts(planning);
  for (const PeerInfo& m : planning.Members()) {
    if (!relays.contains(m.id)) continue;
    for (const int s : m.stages) {
      const std::vector<common::NodeId> replicas = hosts.Replicas(s);
      const bool other = std::any_of(replicas.begin(), replicas.end(),
                                     [&](const common::NodeId& r) { return r != m.id; });
      if (s == 0 || !other) {
        out.insert(m.id);
        break;
      }
    }
  }
  return out;
}

ExcludingView::ExcludingView(const SwarmView& base, const std::vector<common::NodeId>& excluded,
                             std::vector<common::NodeId> always)
    : base_(base), always_(std::move(always)) {
  std::sort(always_.begin(), always_.end());
  std::vector<common::NodeId> sorted = excluded;
  std::sort(sorted.begin(), sorted.end());
  const PipelineHostsView hosts(base);
  const std::vector<PeerInfo> members = base.Members();
  for (const common::NodeId& id : sorted) {
    auto m = std::find_if(members.begin(), members.end(),
                          [&](const PeerInfo& p) { return p.id == id; });
    if (m == members.end() || !base.IsAlive(id)) continue;  // not planned anyway
    if (std::binary_search(always_.begin(), always_.end(), id)) continue;  // hidden already
    bool hide = true;
    for (const int s : m->stages) {
      if (s == 0) {  // a data node: the data order ranks over them
        hide = false;
        break;
      }
      int others = 0;  // live pipeline replicas of `s` left planned
      for (const common::NodeId& r : hosts.Replicas(s)) {
        if (r != id && !Hidden(r)) ++others;
      }
      if (others == 0) {  // the last replica: keep it, the deadline handles it
        hide = false;
        break;
      }
    }
    (hide ? hidden_ : kept_).push_back(id);
  }
}

bool ExcludingView::Hidden(const common::NodeId& id) const {
  return std::binary_search(always_.begin(), always_.end(), id) ||
         std::binary_search(hidden_.begin(), hidden_.end(), id);
}

bool ExcludingView::IsAlive(const common::NodeId& id) const {
  return !Hidden(id) && base_.IsAlive(id);
}

std::vector<common::NodeId> ExcludingView::Replicas(int stage) const {
  std::vector<common::NodeId> out = base_.Replicas(stage);
  out.erase(std::remove_if(out.begin(), out.end(),
                           [this](const common::NodeId& id) { return Hidden(id); }),
            out.end());
  return out;
}

}  // namespace skipswarm::node
