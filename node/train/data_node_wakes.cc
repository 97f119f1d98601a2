#include "node/train/data_node_wakes.h"

#include <utility>
#include <vector>

namespace skipswarm::node {

uint64_t DataNodeWakes::Add(absl::AnyInvocable<void()> wake) {
  absl::MutexLock lock(&mu_);
  const uint64_t id = next_id_++;
  wakes_.emplace(id, std::move(wake));
  return id;
}

bool DataNodeWakes::Cancel(uint64_t id) {
  absl::AnyInvocable<void()> dropped;  // destroyed outside the lock
  absl::MutexLock lock(&mu_);
  auto it = wakes_.find(id);
  if (it == wakes_.end()) return false;
  dropped = std::move(it->second);
  wakes_.erase(it);
  return true;
}

void DataNodeWakes::WakeAll(common::Clock* clock) {
  std::map<uint64_t, absl::AnyInvocable<void()>> wakes;
  {
    absl::MutexLock lock(&mu_);
    if (wakes_.empty()) return;
    wakes.swap(wakes_);
  }
  for (auto& [id, wake] : wakes) clock->RunAfter(absl::ZeroDuration(), std::move(wake));
}

size_t DataNodeWakes::size() const {
  absl::MutexLock lock(&mu_);
  return wakes_.size();
}

}  // namespace skipswarm::node
