#include "node/daemon/gossip/newcomer_ledger.h"

#include <algorithm>
#include <tuple>

namespace skipswarm::node {

NewcomerLedger::NewcomerLedger(common::NodeId self, uint64_t probation_iterations)
    : self_(self), probation_(std::max<uint64_t>(1, probation_iterations)) {}

bool NewcomerLedger::Observe(uint64_t iteration,
                             const std::vector<std::pair<common::NodeId, uint64_t>>& digests,
                             uint64_t mine) {
  const std::vector<common::NodeId> before = Vouched();
  for (const auto& [id, digest] : digests) {
    if (id == self_) continue;
    if (digest != mine) {
      runs_.erase(id);
      continue;
    }
    auto [it, inserted] = runs_.try_emplace(id, Run{iteration, iteration});
    if (!inserted) it->second.last = std::max(it->second.last, iteration);
  }
  while (runs_.size() > kMaxTracked) {
    auto oldest = std::min_element(runs_.begin(), runs_.end(), [](const auto& a, const auto& b) {
      return std::tie(a.second.last, a.first) < std::tie(b.second.last, b.first);
    });
    runs_.erase(oldest);
  }
  return Vouched() != before;
}

bool NewcomerLedger::Withdraw(const common::NodeId& peer) {
  const std::vector<common::NodeId> before = Vouched();
  runs_.erase(peer);
  return Vouched() != before;
}

std::vector<common::NodeId> NewcomerLedger::Vouched() const {
  std::vector<std::pair<uint64_t, common::NodeId>> qualified;  // (since, id)
  for (const auto& [id, run] : runs_) {
    if (Qualifies(run)) qualified.emplace_back(run.since, id);
  }
  std::sort(qualified.begin(), qualified.end());  // longest runs first
  if (qualified.size() > kMaxVouches) qualified.resize(kMaxVouches);
  std::vector<common::NodeId> out;
  out.reserve(qualified.size());
  for (const auto& q : qualified) out.push_back(q.second);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace skipswarm::node
