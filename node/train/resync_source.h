// ResyncSource: which member a replica whose parameters diverged copies
// (Note [Digest re-sync] in node_trainer.h).
//
//   std::optional<NodeId> from = ResyncSource(result.digests, mine, iteration);
//   if (from) group->FetchState(iteration + 1, stage, *from, ...);
//
// The reference is the digest most members hold; among equally common ones
// the smallest digest value. Ties are decided by content so that a peer
// cannot win them by grinding a low node id; with an honest majority the
// reference is the honest state whatever a minority claims. (A tie between
// one honest and one lying replica cannot be told apart from the digests
// alone.) The source rotates among the reference's holders by iteration.
//
// Thread rule: a pure function.
#ifndef SKIPSWARM_NODE_TRAIN_RESYNC_SOURCE_H_
#define SKIPSWARM_NODE_TRAIN_RESYNC_SOURCE_H_

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "common/node_id.h"

namespace skipswarm::node {

// `digests`: each member's digest (ascending id); `mine`: this replica's.
// nullopt when `mine` is the reference (or there is nothing to compare).
std::optional<common::NodeId> ResyncSource(
    const std::vector<std::pair<common::NodeId, uint64_t>>& digests, uint64_t mine,
    uint64_t iteration);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_RESYNC_SOURCE_H_
