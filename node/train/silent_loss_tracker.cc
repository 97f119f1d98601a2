#include "node/train/silent_loss_tracker.h"

#include <algorithm>

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
    const absl::flat_hash_set<common::NodeId>& completed, absl::Duration now) {
  std::vector<Exclusion> out;
  // An iteration that completed no MB at all is no evidence: every relay
  // it routed through is on a lost route and none on a completed one, so
  // blaming them all would exclude healthy replicas with the silent one
  // (ExcludingView then keeps an arbitrary one of each stage). Seen on the
  // simulator's nodes backend: a hung stage-1 replica made whole
  // iterations lose every MB (node/train/README.md).
  if (options_.iterations_to_exclude <= 0 || completed.empty()) return out;
  // A completed MB through a relay clears it: its back-off starts over.
  for (const common::NodeId& id : completed) relays_.erase(id);
  // Ascending id, so that the back-off seeds do not depend on hash order.
  std::vector<common::NodeId> suspects;
  for (const common::NodeId& id : lost) {
    if (!completed.contains(id)) suspects.push_back(id);
  }
  std::sort(suspects.begin(), suspects.end());
  for (const common::NodeId& id : suspects) {
    auto it = relays_.find(id);
    if (it == relays_.end()) {
      it = relays_.try_emplace(id, options_.backoff, seed_ + seeds_++).first;
    }
    Relay& r = it->second;
    // An MB planned before the exclusion began says nothing new.
    if (now < r.until) continue;
    ++r.streak;
    // Note [Silent relay exclusion]: once convicted, one suspect iteration
    // after the back-off is enough for the next, longer one.
    if (!r.convicted && r.streak < options_.iterations_to_exclude) continue;
    const absl::Duration d = r.backoff.Next();
    r.until = now + d;
    r.streak = 0;
    r.convicted = true;
    out.push_back({id, d, r.backoff.attempts()});
  }
  return out;
}

std::vector<common::NodeId> SilentLossTracker::ExcludedAt(absl::Duration now) const {
  std::vector<common::NodeId> out;
  for (const auto& [id, r] : relays_) {
    if (now < r.until) out.push_back(id);  // std::map: ascending id
  }
  return out;
}

ExcludingView::ExcludingView(const SwarmView& base, const std::vector<common::NodeId>& excluded)
    : base_(base) {
  std::vector<common::NodeId> sorted = excluded;
  std::sort(sorted.begin(), sorted.end());
  const PipelineHostsView hosts(base);
  const std::vector<PeerInfo> members = base.Members();
  for (const common::NodeId& id : sorted) {
    auto m = std::find_if(members.begin(), members.end(),
                          [&](const PeerInfo& p) { return p.id == id; });
    if (m == members.end() || !base.IsAlive(id)) continue;  // not planned anyway
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
  return std::binary_search(hidden_.begin(), hidden_.end(), id);
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
