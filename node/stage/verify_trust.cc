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
  if (v.condemned || !(options_.exclude_at > 0) || v.strikes < options_.exclude_at) return false;
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

std::vector<PeerInfo> VerifiedRoutingView::Members() const {
  std::vector<PeerInfo> out = inner_->Members();
  out.erase(std::remove_if(out.begin(), out.end(),
                           [&](const PeerInfo& p) { return trust_->Condemned(p.id); }),
            out.end());
  return out;
}

std::vector<common::NodeId> VerifiedRoutingView::Replicas(int stage) const {
  std::vector<common::NodeId> out = inner_->Replicas(stage);
  out.erase(std::remove_if(out.begin(), out.end(),
                           [&](const common::NodeId& id) { return trust_->Condemned(id); }),
            out.end());
  return out;
}

}  // namespace skipswarm::node
