#include "node/daemon/gossip/alone_check.h"

#include <algorithm>

namespace skipswarm::node {

AloneCheck::AloneCheck(absl::Duration after, int num_stages, common::Clock* clock)
    : after_(after), num_stages_(num_stages), clock_(clock) {}

bool AloneCheck::Due() { return pace_.Allow(clock_->SteadyNow(), /*held=*/nullptr); }

std::optional<AloneVerdict> AloneCheck::Poll(const membership::View& view, uint64_t own,
                                             uint64_t iterations) {
  const absl::Duration now = clock_->SteadyNow();
  bool needs_peers = true;
  for (const membership::MemberInfo* m : view.Live()) {
    if (m->id == view.self) {
      // Hosting every stage, we train alone (a one-member swarm).
      needs_peers = static_cast<int>(m->stages.size()) < num_stages_;
      continue;
    }
    alone_since_.reset();
    return std::nullopt;
  }
  if (!needs_peers) {
    alone_since_.reset();
    return std::nullopt;
  }
  if (!alone_since_.has_value()) alone_since_ = now;
  const absl::Duration alone_for = now - *alone_since_;
  if (alone_for < after_) return std::nullopt;
  // Note [Alone after the swarm]: a data node that left after the last
  // iteration trained the whole run.
  std::optional<uint64_t> finished;
  for (const membership::MemberInfo& m : view.members) {
    if (m.id == view.self || m.state != proto::MEMBER_STATE_LEFT) continue;
    if (std::find(m.stages.begin(), m.stages.end(), 0u) == m.stages.end()) continue;
    if (m.iteration + 1 < iterations) continue;
    finished = std::max(finished.value_or(0), m.iteration);
  }
  if (finished.has_value()) return AloneVerdict{AloneVerdict::kSwarmFinished, *finished, alone_for};
  return AloneVerdict{AloneVerdict::kAlone, own, alone_for};
}

}  // namespace skipswarm::node
