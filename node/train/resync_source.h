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
// not asked again and again, and a newcomer never serves a state trusted
// replicas hold.
//
// Note [Checked re-sync]: a source may claim the reference digest and
// serve another state. What it serves is its state after this iteration's
// update, which nothing compared yet, so the check comes at the stage's
// next comparison: an honest source starts that round from exactly the
// state it served, and so does the importer (nothing updates either in
// between; with outer steps the digest is the anchor's, which only the
// sync moves), so their digests there are equal. A source
// whose digest differs served a state it does not hold: the importer logs
// it, reports it (StageStep::resync_source_lied, counted as
// skipswarm_resync_source_lied_total) and from then on treats it as on
// probation (Note [Choosing the reference]): it never outranks a trusted
// replica again nor serves a state to this node, so the same comparison
// moves the importer back to the trusted holders' state where there is
// one. The distrust is this node's own, from its own comparison: a
// replica that lies about its own digest blames honest sources and misleads
// only itself. (Refusing before the import would need the source's digest
// after the update, which the group does not carry.)
//
// Thread rule: ResyncSource is a pure function; ResyncChecks is thread-safe.
#ifndef SKIPSWARM_NODE_TRAIN_RESYNC_SOURCE_H_
#define SKIPSWARM_NODE_TRAIN_RESYNC_SOURCE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
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

// Note [Checked re-sync]: the re-syncs of one trainer awaiting their check,
// and the sources caught serving a state they did not hold (the latest
// kMaxLiars; bounded against a swarm of identities).
class ResyncChecks {
 public:
  static constexpr size_t kMaxLiars = 256;
  // A re-sync of `stage` imported `source`'s state.
  void Imported(int stage, const common::NodeId& source);
  // The stage's next comparison (`mine`: this replica's digest in it):
  // the pending source, when its digest there differs from `mine` (logged);
  // nullopt otherwise, or when it is absent from `digests`.
  std::optional<common::NodeId> Check(
      uint64_t iteration, int stage,
      const std::vector<std::pair<common::NodeId, uint64_t>>& digests, uint64_t mine);
  bool Distrusted(const common::NodeId& id) const;

 private:
  mutable absl::Mutex mu_;
  std::map<int, common::NodeId> pending_ ABSL_GUARDED_BY(mu_);  // by stage
  std::deque<common::NodeId> liars_ ABSL_GUARDED_BY(mu_);
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_RESYNC_SOURCE_H_
