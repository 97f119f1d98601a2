// NewcomerLedger: which replicas this node may vouch for under Note
// [Newcomer probation] (training_members.h): those whose parameter digest
// matched its own at every comparison of a replica group they share, for
// the swarm's probation length in a row.
//
//   NewcomerLedger ledger(self, /*probation_iterations=*/200);
//   // After each iteration's averaging, per hosted stage:
//   if (ledger.Observe(it, step.digests, step.digest_before)) {
//     membership->UpdateLocalRecord([&](proto::NodeRecord* r) { ... ledger.Vouched() ... });
//   }
//
// A peer's run starts at its first matching comparison and counts the
// iterations from there through its latest match (with outer steps the
// digests are compared every H iterations, and the run still counts
// iterations); one mismatch, at any shared stage, ends it and withdraws
// the vouch. A peer absent from a comparison (left out, not a contributor)
// neither gains nor loses. At most kMaxTracked peers are tracked (the
// least recently seen is forgotten first), so a burst of identities in
// our groups costs bounded memory.
//
// Note [Vouch withdrawal]
// Digests say that a peer's weights are the group's; they say nothing of
// what it computes with them. So once this node's output checks (Note
// [Verify trust] in node/stage/verify_trust.h) record a mismatch that names
// a peer (the checked member on probation, or either member of a
// mismatching trusted pair, Note [Trusted disputes]), the daemon calls
// Withdraw at its next boundary: the peer's run ends as at a digest
// mismatch, so our record's vouch for it goes (re-signed and gossiped like
// any change of Vouched()), and it is earned again only by a whole
// probation of matching digests from the next comparison on (the daemon
// never vouches for a member it condemned). Where ours was the vouch that
// made it trusted, every node's TrainingMembers puts it back on probation
// from our next record: routed only beside a trusted replica, checked at
// the full --verify_rate, its accusers' bans spread by Note [Verify bans].
// Why on one mismatch and on our own word only: withdrawing our vouch
// removes only what we said, so a lying accuser gains nothing from it (it
// can withdraw its own vouches, nobody else's), and the worst an honest
// member loses to a false mismatch (or to a lying partner in a trusted
// pair) is one voucher's word for one probation. Other vouchers keep
// theirs: a member vouched for by several trusted peers stays trusted until
// each of them caught it, or Note [Verify bans] bans it.
//
// Thread rule: thread-compatible (the daemon's iteration callback owns it).
#ifndef SKIPSWARM_NODE_DAEMON_GOSSIP_NEWCOMER_LEDGER_H_
#define SKIPSWARM_NODE_DAEMON_GOSSIP_NEWCOMER_LEDGER_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/node_id.h"

namespace skipswarm::node {

class NewcomerLedger {
 public:
  static constexpr size_t kMaxTracked = 1024;
  // At most this many vouches (the record's limit, membership/record.h).
  static constexpr size_t kMaxVouches = 64;

  // REQUIRES: probation_iterations >= 1.
  NewcomerLedger(common::NodeId self, uint64_t probation_iterations);

  // One comparison in `iteration`: each contributor's digest
  // (ReduceResult::digests) against ours, `mine`. True when Vouched()
  // changed.
  bool Observe(uint64_t iteration,
               const std::vector<std::pair<common::NodeId, uint64_t>>& digests, uint64_t mine);

  // Note [Vouch withdrawal]: ends `peer`'s run (a mismatch this node's
  // output checks recorded). True when Vouched() changed.
  bool Withdraw(const common::NodeId& peer);

  // The peers whose run reached the probation length, ascending id; the
  // longest runs first when more than kMaxVouches qualify.
  std::vector<common::NodeId> Vouched() const;

 private:
  struct Run {
    uint64_t since = 0;  // first matching iteration of the run
    uint64_t last = 0;   // latest matching iteration
  };
  bool Qualifies(const Run& run) const { return run.last - run.since + 1 >= probation_; }

  const common::NodeId self_;
  const uint64_t probation_;
  absl::flat_hash_map<common::NodeId, Run> runs_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_GOSSIP_NEWCOMER_LEDGER_H_
