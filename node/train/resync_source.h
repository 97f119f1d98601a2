// ResyncSource: which member a replica whose parameters diverged copies
// (Note [Digest re-sync] in node_trainer.h).
//
//   std::optional<NodeId> from =
//       ResyncSource(result.digests, mine, iteration, /*on_probation=*/newcomers);
//   if (from) group->FetchState(iteration + 1, stage, *from, ...);
//
// Note [Choosing the reference]: the reference is the digest the group
// keeps; a replica whose digest differs fetches a holder's state and
// drops its own, so nothing a peer chooses freely may decide it. A digest
// value is chosen freely (a liar reports 0), and so, in an open swarm, is a
// fresh identity. The rule, which every replica computes alike from the
// same digests:
//  1. Trust first: digests are ranked by how many holders are trusted (not
//     on newcomer probation, Note [Newcomer probation] in node/daemon/
//     gossip/training_members.h; GroupComm::OnProbation), then by how many
//     hold them at all. Newcomers, however many, never outvote a trusted
//     replica; with nobody on probation (a closed swarm) it is the plain
//     majority.
//  2. A replica never abandons its state for an equally ranked one: when
//     its own digest is among the best ranked, it keeps its state. Two
//     equally trusted replicas that disagree (one may be lying, and the
//     digests cannot say which) both keep theirs; the disagreement stays
//     visible (logged each comparison, and the newcomer ledger vouches for
//     no one it disagrees with) instead of being settled for whoever lies.
//  3. A replica outside the best ranked digests takes, among them, the one
//     held by the lowest node id: deterministic, and not steerable by the
//     digest value (an id can be ground, but it only picks between equally
//     supported states, none of them this replica's).
// The source rotates by iteration among the reference's trusted holders
// (all its holders when none is trusted), so one that serves a bad state is
// not asked again and again, and a newcomer never serves a trusted state.
//
// Thread rule: a pure function.
#ifndef SKIPSWARM_NODE_TRAIN_RESYNC_SOURCE_H_
#define SKIPSWARM_NODE_TRAIN_RESYNC_SOURCE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "common/node_id.h"

namespace skipswarm::node {

// `digests`: each member's digest (ascending id); `mine`: this replica's;
// `on_probation`: members not trusted (Note [Choosing the reference]).
// nullopt when this replica keeps its state (its digest is the reference or
// ties with it) or there is nothing to compare.
std::optional<common::NodeId> ResyncSource(
    const std::vector<std::pair<common::NodeId, uint64_t>>& digests, uint64_t mine,
    uint64_t iteration, const std::set<common::NodeId>& on_probation = {});
// The same, asking `on_probation` about each member of `digests`
// (GroupComm::OnProbation).
std::optional<common::NodeId> ResyncSource(
    const std::vector<std::pair<common::NodeId, uint64_t>>& digests, uint64_t mine,
    uint64_t iteration, const std::function<bool(const common::NodeId&)>& on_probation);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_RESYNC_SOURCE_H_
