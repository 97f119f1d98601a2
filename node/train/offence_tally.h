// OffenceTally: when a shard owner's verdicts on a sender's gradient parts
// become a ban (Note [Group bans] in grpc_group.h).
//
//   OffenceTally tally(/*ban_after=*/3);
//   for (const common::NodeId& id : tally.Record(iteration, stage,
//            OffenceTally::Offenders(verdicts, self))) ban(id, tally.Reason(...));
//
// Note [Offences in a row]: a round in which this owner left a sender's part
// out as non-finite or pulled it in as an outlier (Note [Robust averaging]
// in robust_sum.h) is one offence (clipping by norm is not: honest spikes
// meet that bound); a sender is banned once its offences at one stage fill
// ban_after consecutive rounds (iterations i - ban_after + 1 .. i). It used
// to be ban_after of the last 10 rounds, which banned honest pipeline
// replicas in 5 of 7 fault-free runs of the mixed SDP swarm
// (tests/adversarial/README.md, "False bans with no attacker"): a round's
// honest outlier is one micro-batch whose gradient is far from the others'
// in one shard (the loss spikes of a few data iterations, at every stage
// the micro-batch crosses: 7x to 37x the lower median distance, as far as
// a sign-flipped SDP liar's 6.4x to 9.3x, so no factor tells them apart in one
// round). With 3 pipeline replicas of 2 visits each the spike lands on a
// replica at random, and the same one took 3 of one owner's rounds within
// 10 (e.g. iterations 28, 35, 37). A liar lies every round: in every
// recorded attack the owners that banned it pulled it in at rounds 0, 1
// and 2, so it is still banned at its third round. What this gives up: a liar that lies at most ban_after - 1
// rounds in a row is never banned; each lie is still pulled in (or left out
// when not finite), so it moves a round's step by the pull-in bound at
// most, as an unbanned liar did before its third offence.
//
// A redone round (the same iteration again) counts once. Thread rule: not
// thread-safe; the caller serializes (GrpcGroupComm holds its mutex).
#ifndef SKIPSWARM_NODE_TRAIN_OFFENCE_TALLY_H_
#define SKIPSWARM_NODE_TRAIN_OFFENCE_TALLY_H_

#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "common/node_id.h"
#include "node/train/robust_sum.h"

namespace skipswarm::node {

class OffenceTally {
 public:
  // ban_after <= 0: never bans.
  explicit OffenceTally(int ban_after) : ban_after_(ban_after) {}

  // The senders named in `verdicts` for an offence (non-finite or outlier),
  // never `self`.
  static std::set<common::NodeId> Offenders(const std::vector<PartVerdict>& verdicts,
                                            const common::NodeId& self);

  // Records one round of `stage` at `iteration` in which `offenders` were
  // refused; returns those whose offences now fill ban_after rounds in a
  // row (each once per call; a caller that already banned one ignores it).
  std::vector<common::NodeId> Record(uint64_t iteration, int stage,
                                     const std::set<common::NodeId>& offenders);

  // The length of `from`'s current run of offences at `stage` (0: none).
  int Run(int stage, const common::NodeId& from) const;

 private:
  struct Streak {
    uint64_t last = 0;  // the iteration of the latest offence
    int length = 0;
  };
  int ban_after_;
  std::map<std::pair<int, common::NodeId>, Streak> streaks_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_OFFENCE_TALLY_H_
