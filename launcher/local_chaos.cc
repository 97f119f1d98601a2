#include "launcher/local_chaos.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace skipswarm::launcher {

LocalChaos::LocalChaos(ChaosOptions options, int slots, absl::Duration now)
    : options_(options), slots_(slots), random_(options.seed) {
  Reset(now);
}

void LocalChaos::Reset(absl::Duration now) {
  next_kill_ = now + Jittered(options_.kill_every);
  next_stall_ = now + Jittered(options_.stall_every);
  respawns_pending_.clear();
  stalled_.clear();
  advanced_ = now;
}

// Uniform in [0.5, 1.5] x mean: moments that do not line up with
// iterations or checkpoints.
absl::Duration LocalChaos::Jittered(absl::Duration mean) {
  std::uniform_real_distribution<double> u(0.5, 1.5);
  return mean * u(random_);
}

std::vector<ChaosAction> LocalChaos::Step(absl::Duration now,
                                          const std::vector<ChaosNode>& nodes) {
  std::vector<ChaosAction> out;
  if (!stalled_.empty() && now >= resume_at_) {
    out.push_back({ChaosAction::kResume, stalled_, -1});
    stalled_.clear();
  }
  for (auto it = respawns_pending_.begin(); it != respawns_pending_.end();) {
    if (now < it->at) {
      ++it;
      continue;
    }
    out.push_back({ChaosAction::kRespawn, it->restart, it->stage});
    ++respawns_;
    restarts_ += it->restart.empty() ? 0 : 1;
    it = respawns_pending_.erase(it);
  }
  std::vector<const ChaosNode*> live;
  for (const ChaosNode& n : nodes) {
    if (n.live && n.name != stalled_) live.push_back(&n);
  }
  // Dead slots: replacements not started yet count as dead.
  const int max_dead =
      static_cast<int>(std::floor(options_.max_dead_fraction * static_cast<double>(slots_)));
  const int live_count = static_cast<int>(live.size()) + (stalled_.empty() ? 0 : 1);
  const int dead = std::max(0, slots_ - live_count);
  // Note [Chaos waits for progress].
  const bool stuck = now - advanced_ > options_.hold_after;
  if (stuck && now >= next_kill_) {
    next_kill_ = now + Jittered(options_.kill_every);
    ++held_;
  }
  if (stuck && now >= next_stall_) {
    next_stall_ = now + Jittered(options_.stall_every);
    ++held_;
  }
  if (now >= next_kill_) {
    next_kill_ = now + Jittered(options_.kill_every);
    // Note [Survivable chaos]: a victim's stage keeps another serving,
    // unstalled replica.
    std::map<int, int> serving;
    for (const ChaosNode* n : live) serving[n->stage] += n->serving ? 1 : 0;
    std::vector<const ChaosNode*> victims;
    for (const ChaosNode* n : live) {
      if (serving[n->stage] - (n->serving ? 1 : 0) >= 1) victims.push_back(n);
    }
    if (victims.empty() && !live.empty()) ++spared_;
    if (!victims.empty() && dead + 1 <= max_dead) {
      std::uniform_int_distribution<size_t> pick(0, victims.size() - 1);
      const ChaosNode* victim = victims[pick(random_)];
      out.push_back({ChaosAction::kKill, victim->name, victim->stage});
      ++kills_;
      // Note [Restart on own disk].
      const bool restart = options_.restart_every > 0 && kills_ % options_.restart_every == 0;
      respawns_pending_.push_back(
          {now + options_.respawn_after, victim->stage, restart ? victim->name : ""});
      live.erase(std::find(live.begin(), live.end(), victim));
    }
  }
  if (now >= next_stall_) {
    next_stall_ = now + Jittered(options_.stall_every);
    if (stalled_.empty() && !live.empty()) {
      std::uniform_int_distribution<size_t> pick(0, live.size() - 1);
      stalled_ = live[pick(random_)]->name;
      resume_at_ = now + options_.stall_for;
      out.push_back({ChaosAction::kStall, stalled_, -1});
      ++stalls_;
    }
  }
  return out;
}

}  // namespace skipswarm::launcher
