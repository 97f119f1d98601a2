#include "node/stage/verify_trust.h"

#include <algorithm>

namespace skipswarm::node {

VerifyTrust::VerifyTrust(VerifyTrustOptions options) : options_(options) {}

bool VerifyTrust::Record(const common::NodeId& checked, bool match) {
  absl::MutexLock lock(&mu_);
  MemberVerdicts& v = verdicts_[checked];
  if (match) {
    ++v.matches;
    v.strikes = std::max(0.0, v.strikes - options_.forgive_per_match);
    return false;
  }
  ++v.mismatches;
  v.strikes += 1;
  mismatched_.insert(checked);
  if (v.condemned || !(options_.exclude_at > 0) || v.strikes < options_.exclude_at) return false;
  v.condemned = true;
  ++generation_;
  return true;
}

std::vector<common::NodeId> VerifyTrust::RecordPair(const common::NodeId& checked,
                                                    const common::NodeId& verifier, bool match) {
  absl::MutexLock lock(&mu_);
  if (checked == verifier) return {};
  MemberVerdicts& v = verdicts_[checked];
  ++(match ? v.matches : v.mismatches);
  double& strikes = pairs_[std::minmax(checked, verifier)];
  strikes = match ? std::max(0.0, strikes - options_.forgive_per_match) : strikes + 1;
  std::vector<common::NodeId> out;
  if (!match) {
    mismatched_.insert(checked);
    mismatched_.insert(verifier);
  }
  if (match || !(options_.dispute_at > 0)) return out;
  for (const common::NodeId* m : {&checked, &verifier}) {
    MemberVerdicts& mv = verdicts_[*m];
    if (mv.condemned || DisputesLocked(*m) < 2) continue;
    mv.condemned = true;
    ++generation_;
    out.push_back(*m);
  }
  std::sort(out.begin(), out.end());
  return out;
}

int VerifyTrust::DisputesLocked(const common::NodeId& id) const {
  int n = 0;
  for (const auto& [pair, strikes] : pairs_) {
    if (strikes < options_.dispute_at) continue;
    if (pair.first != id && pair.second != id) continue;
    const common::NodeId& other = pair.first == id ? pair.second : pair.first;
    auto it = verdicts_.find(other);
    if (it == verdicts_.end() || !it->second.condemned) ++n;
  }
  return n;
}

bool VerifyTrust::Condemn(const common::NodeId& id) {
  absl::MutexLock lock(&mu_);
  MemberVerdicts& v = verdicts_[id];
  ++v.mismatches;
  mismatched_.insert(id);
  if (v.condemned) return false;
  v.condemned = true;
  ++generation_;
  return true;
}

bool VerifyTrust::Condemned(const common::NodeId& id) const {
  absl::MutexLock lock(&mu_);
  auto it = verdicts_.find(id);
  return it != verdicts_.end() && it->second.condemned;
}

std::vector<common::NodeId> VerifyTrust::condemned() const {
  absl::MutexLock lock(&mu_);
  std::vector<common::NodeId> out;
  for (const auto& [id, v] : verdicts_) {
    if (v.condemned) out.push_back(id);
  }
  return out;
}

std::map<common::NodeId, MemberVerdicts> VerifyTrust::verdicts() const {
  absl::MutexLock lock(&mu_);
  return verdicts_;
}

uint64_t VerifyTrust::generation() const {
  absl::MutexLock lock(&mu_);
  return generation_;
}

std::vector<common::NodeId> VerifyTrust::TakeMismatched() {
  absl::MutexLock lock(&mu_);
  std::vector<common::NodeId> out(mismatched_.begin(), mismatched_.end());
  mismatched_.clear();
  return out;
}

namespace {

bool SharesAStage(const PeerInfo& a, const PeerInfo& b) {
  for (int s : a.stages) {
    if (std::find(b.stages.begin(), b.stages.end(), s) != b.stages.end()) return true;
  }
  return false;
}

// Whether a trusted member other than `accused`, neither banned in this
// pass nor distrusted, hosts `stage`.
bool AnotherTrustedHost(const std::map<common::NodeId, const PeerInfo*>& by_id,
                        const common::NodeId& accused, int stage,
                        const std::set<common::NodeId>& banned,
                        const std::set<common::NodeId>& distrusted) {
  for (const auto& [id, p] : by_id) {
    if (id == accused || p->on_probation || banned.count(id) > 0 || distrusted.count(id) > 0) {
      continue;
    }
    if (std::find(p->stages.begin(), p->stages.end(), stage) != p->stages.end()) return true;
  }
  return false;
}

}  // namespace

std::map<common::NodeId, std::vector<common::NodeId>> VerifyQuorumBans(
    const common::NodeId& self, const std::vector<PeerInfo>& live,
    const std::set<common::NodeId>& distrusted,
    const EvidencedBans& evidenced) {
  // One voice per accuser (its first entry), its ids deduplicated.
  std::map<common::NodeId, const PeerInfo*> by_id;
  std::map<common::NodeId, std::set<common::NodeId>> accusers;
  for (const PeerInfo& p : live) {
    if (!by_id.emplace(p.id, &p).second) continue;
    if (p.id == self || p.on_probation || distrusted.count(p.id) > 0) continue;
    for (const common::NodeId& accused : p.bans) accusers[accused].insert(p.id);
  }
  // Note [Evidence bans]: the live members a false-input proof convicts,
  // whatever their trust.
  std::set<common::NodeId> proven;
  for (const auto& [accused, ban] : evidenced) {
    if (ban.proven && accused != self && by_id.count(accused) > 0) proven.insert(accused);
  }
  std::map<common::NodeId, std::vector<common::NodeId>> out;
  std::set<common::NodeId> trusted_banned;
  for (auto& [accused, by] : accusers) {
    auto it = by_id.find(accused);
    if (accused == self || it == by_id.end()) continue;
    const PeerInfo& x = *it->second;
    by.erase(accused);
    if (!x.on_probation) {
      // Note [Trusted verify bans]: only accusers that share no stage with
      // it (their ban of it cannot be a group ban).
      for (auto a = by.begin(); a != by.end();) {
        a = SharesAStage(*by_id.at(*a), x) ? by.erase(a) : std::next(a);
      }
    }
    if (by.size() < kVerifyBanQuorum) continue;
    out.emplace(accused, std::vector<common::NodeId>(by.begin(), by.end()));
    if (!x.on_probation) trusted_banned.insert(accused);
  }
  // Note [Trusted verify bans]: never the last trusted host of a stage
  // (the proven left out of the hosts, and never kept by it).
  std::set<common::NodeId> banned = trusted_banned;
  banned.insert(proven.begin(), proven.end());
  for (const common::NodeId& accused : trusted_banned) {
    if (proven.count(accused) > 0) continue;
    const std::vector<int>& stages = by_id.at(accused)->stages;
    if (std::any_of(stages.begin(), stages.end(), [&](int stage) {
          return !AnotherTrustedHost(by_id, accused, stage, banned, distrusted);
        })) {
      out.erase(accused);
    }
  }
  // Note [Evidence bans]: a checked piece against a live newcomer, or a
  // false-input proof against any live member, stands for the quorum.
  for (const auto& [accused, ban] : evidenced) {
    auto it = by_id.find(accused);
    if (accused == self || it == by_id.end()) continue;
    if (!ban.proven && !it->second->on_probation) continue;
    out.emplace(accused, std::vector<common::NodeId>{ban.accuser});
  }
  return out;
}

std::set<common::NodeId> VerifiedRoutingView::Excluded() const {
  const uint64_t version = this->version();
  {
    absl::MutexLock lock(&mu_);
    if (excluded_version_ == version) return excluded_;
  }
  // Computed outside the lock (the inner view takes its own). A state newer
  // than `version` may be stored under it: the next call sees a newer
  // version and computes again.
  const std::vector<common::NodeId> own = trust_->condemned();
  std::set<common::NodeId> out(own.begin(), own.end());
  std::vector<PeerInfo> live;
  for (PeerInfo& p : inner_->Members()) {
    if (inner_->IsAlive(p.id)) live.push_back(std::move(p));
  }
  const EvidencedBans evidenced = evidence_ != nullptr ? evidence_->adopted() : EvidencedBans{};
  for (const auto& [id, by] : VerifyQuorumBans(self_, live, out, evidenced)) out.insert(id);
  absl::MutexLock lock(&mu_);
  excluded_version_ = version;
  excluded_ = out;
  return out;
}

std::vector<PeerInfo> VerifiedRoutingView::Members() const {
  std::vector<PeerInfo> out = inner_->Members();
  const std::set<common::NodeId> excluded = Excluded();
  out.erase(std::remove_if(out.begin(), out.end(),
                           [&](const PeerInfo& p) { return excluded.count(p.id) > 0; }),
            out.end());
  return out;
}

std::vector<common::NodeId> VerifiedRoutingView::Replicas(int stage) const {
  std::vector<common::NodeId> out = inner_->Replicas(stage);
  const std::set<common::NodeId> excluded = Excluded();
  out.erase(std::remove_if(out.begin(), out.end(),
                           [&](const common::NodeId& id) { return excluded.count(id) > 0; }),
            out.end());
  return out;
}

}  // namespace skipswarm::node
