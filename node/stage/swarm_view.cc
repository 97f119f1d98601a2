#include "node/stage/swarm_view.h"

#include <algorithm>
#include <utility>

namespace skipswarm::node {
namespace {

std::vector<PeerInfo> Sorted(std::vector<PeerInfo> members) {
  std::sort(members.begin(), members.end(),
            [](const PeerInfo& a, const PeerInfo& b) { return a.id < b.id; });
  return members;
}

}  // namespace

StaticSwarmView::StaticSwarmView(std::vector<PeerInfo> members)
    : members_(Sorted(std::move(members))) {}

std::vector<PeerInfo> StaticSwarmView::Members() const {
  absl::MutexLock lock(&mu_);
  if (paused_.empty()) return members_;
  std::vector<PeerInfo> out;
  for (const PeerInfo& p : members_) {
    if (!paused_.contains(p.id)) out.push_back(p);
  }
  return out;
}

void StaticSwarmView::SetPaused(const common::NodeId& id, bool paused) {
  absl::MutexLock lock(&mu_);
  if (paused ? paused_.insert(id).second : paused_.erase(id) > 0) ++version_;
}

void StaticSwarmView::SetStopping(const common::NodeId& id, std::optional<uint64_t> stop_after) {
  absl::MutexLock lock(&mu_);
  if (stop_after.has_value()) {
    stopping_[id] = *stop_after;
  } else {
    stopping_.erase(id);
  }
  ++resigned_[id];
  ++version_;
}

void StaticSwarmView::NewRecord(const common::NodeId& id) {
  absl::MutexLock lock(&mu_);
  ++resigned_[id];
  ++version_;
}

std::optional<uint64_t> StaticSwarmView::Incarnation(const common::NodeId& id) const {
  absl::MutexLock lock(&mu_);
  const bool member = std::any_of(members_.begin(), members_.end(),
                                  [&id](const PeerInfo& p) { return p.id == id; });
  if (!member) return std::nullopt;
  auto it = resigned_.find(id);
  return 1 + (it == resigned_.end() ? 0 : it->second);
}

std::optional<uint64_t> StaticSwarmView::StopAfter(const common::NodeId& id) const {
  absl::MutexLock lock(&mu_);
  auto it = stopping_.find(id);
  if (it == stopping_.end()) return std::nullopt;
  return it->second;
}

void StaticSwarmView::SetAddresses(const common::NodeId& id, const std::string& address,
                                   const std::string& group_address) {
  absl::MutexLock lock(&mu_);
  for (PeerInfo& p : members_) {
    if (p.id != id) continue;
    p.address = address;
    p.group_address = group_address;
    ++version_;
  }
}

bool StaticSwarmView::IsAlive(const common::NodeId& id) const {
  absl::MutexLock lock(&mu_);  // members_ and dead_
  if (dead_.contains(id)) return false;
  return std::any_of(members_.begin(), members_.end(),
                     [&](const PeerInfo& p) { return p.id == id; });
}

std::vector<common::NodeId> StaticSwarmView::Replicas(int stage) const {
  absl::MutexLock lock(&mu_);
  std::vector<common::NodeId> out;
  for (const PeerInfo& p : members_) {
    if (dead_.contains(p.id) || paused_.contains(p.id)) continue;
    if (std::find(p.stages.begin(), p.stages.end(), stage) != p.stages.end()) out.push_back(p.id);
  }
  return out;
}

void StaticSwarmView::MarkDead(const common::NodeId& id) {
  absl::MutexLock lock(&mu_);
  if (dead_.insert(id).second) ++version_;
}

uint64_t StaticSwarmView::version() const {
  absl::MutexLock lock(&mu_);
  return version_;
}

std::vector<PeerInfo> PipelineHostsView::Members() const {
  std::vector<PeerInfo> out = view_.Members();
  out.erase(std::remove_if(out.begin(), out.end(), [](const PeerInfo& p) { return p.subnetwork; }),
            out.end());
  return out;
}

std::vector<common::NodeId> PipelineHostsView::Replicas(int stage) const {
  std::vector<common::NodeId> out = view_.Replicas(stage);
  for (const PeerInfo& p : view_.Members()) {
    if (p.subnetwork) out.erase(std::remove(out.begin(), out.end(), p.id), out.end());
  }
  return out;
}

}  // namespace skipswarm::node
