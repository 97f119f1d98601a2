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
// meet that bound). A sender is banned at one stage when its offences fill
// ban_after of this owner's rounds of that stage in a row, or when its
// decayed count reaches ban_after + kScoreSlack (3.5 at the default 3):
// each offence adds 1 and the count is multiplied by kDecayPerRound (0.92)
// at every round of the stage.
// Rounds, not iterations: with outer steps (--outer_every) a stage averages
// every few iterations, and a liar's offences are consecutive rounds.
// Why in a row: a round's honest outlier is one micro-batch whose gradient
// is far from the others' in one shard (a data iteration's loss spike, at
// every stage the micro-batch crosses), as far from the median as a
// sign-flipped SDP liar's part, so neither a factor nor how far beyond the
// bound a part was tells them apart in one round; with three replicas of a
// stage the spike lands on one at random, and a count of 3 within 10
// rounds banned honest replicas in most fault-free runs of the mixed SDP
// swarm (tests/adversarial/README.md, "False bans with no attacker"). A
// liar that lies every round offends in every round: banned at its
// ban_after-th.
// Why the decayed count: a liar that breaks its runs (at most 2 in a row)
// still offends in a steady share of the rounds for as long as it lies; an
// honest member offends in bursts at the data's hard iterations and then
// not for tens of rounds. A sender offending in every k-th round peaks at
// 1 / (1 - 0.92^k): with ban_after 3 one offending in every 4th round or
// more often is banned; one offending in every 5th or fewer (peak 2.93) is
// not, and each of its lies is still pulled in (or left out when not
// finite), so it moves a round's step by the pull-in bound at most. The
// decay and the bar were chosen from the logged honest bursts (which stay
// below the bar) and intermittent liars (which reach it); the margins are
// thin on both sides, see tests/adversarial/README.md, "An intermittent
// liar", for the runs and the alternatives tried.
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

  // What a sender's decayed count keeps of itself per round of the stage,
  // and how far above ban_after the count that bans is.
  static constexpr double kDecayPerRound = 0.92;
  static constexpr double kScoreSlack = 0.5;

  // Records this owner's round of `stage` at `iteration` (every round, also
  // one without offences: it ends the runs) in which `offenders` were
  // refused; returns those that now meet Note [Offences in a row] (each once
  // per call; a caller that already banned one ignores it).
  std::vector<common::NodeId> Record(uint64_t iteration, int stage,
                                     const std::set<common::NodeId>& offenders);

  // The length of `from`'s current run of offences at `stage` (0: none).
  int Run(int stage, const common::NodeId& from) const;
  // Its decayed count at `stage` as of its latest offence (0: none).
  double Score(int stage, const common::NodeId& from) const;

 private:
  // Per stage: how many rounds this owner recorded, and the latest's
  // iteration (a round of an older iteration finishing late counts as the
  // latest one).
  struct Rounds {
    uint64_t count = 0;
    uint64_t last_iteration = 0;
  };
  struct Streak {
    uint64_t last_iteration = 0;  // of the latest offence
    uint64_t last_round = 0;      // its round index (Rounds::count - 1 then)
    int length = 0;
    double score = 0;  // the decayed count, as of last_round
  };
  int ban_after_;
  std::map<int, Rounds> rounds_;
  std::map<std::pair<int, common::NodeId>, Streak> streaks_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_OFFENCE_TALLY_H_
