#include "node/train/resync_source.h"

#include <map>

namespace skipswarm::node {

std::optional<common::NodeId> ResyncSource(
    const std::vector<std::pair<common::NodeId, uint64_t>>& digests, uint64_t mine,
    uint64_t iteration) {
  std::map<uint64_t, int> count;  // ascending digest value
  for (const auto& [id, d] : digests) ++count[d];
  uint64_t reference = 0;
  int best = 0;
  for (const auto& [d, n] : count) {  // a tie keeps the smaller digest
    if (n > best) {
      best = n;
      reference = d;
    }
  }
  if (best == 0 || mine == reference) return std::nullopt;
  std::vector<common::NodeId> holders;
  for (const auto& [id, d] : digests) {
    if (d == reference) holders.push_back(id);
  }
  return holders[iteration % holders.size()];
}

}  // namespace skipswarm::node
