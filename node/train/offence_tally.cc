#include "node/train/offence_tally.h"

#include <cmath>

namespace skipswarm::node {

std::set<common::NodeId> OffenceTally::Offenders(const std::vector<PartVerdict>& verdicts,
                                                 const common::NodeId& self) {
  std::set<common::NodeId> out;
  for (const PartVerdict& v : verdicts) {
    if (v.from == self) continue;
    if (v.kind == PartVerdict::Kind::kNonFinite || v.kind == PartVerdict::Kind::kOutlier) {
      out.insert(v.from);
    }
  }
  return out;
}

std::vector<common::NodeId> OffenceTally::Record(uint64_t iteration, int stage,
                                                 const std::set<common::NodeId>& offenders) {
  std::vector<common::NodeId> reached;
  if (ban_after_ <= 0) return reached;
  Rounds& rounds = rounds_[stage];
  if (rounds.count == 0 || iteration > rounds.last_iteration) {
    ++rounds.count;
    rounds.last_iteration = iteration;
  }
  const uint64_t round = rounds.count - 1;
  const double score_ban = static_cast<double>(ban_after_) + kScoreSlack;
  for (const common::NodeId& from : offenders) {
    Streak& s = streaks_[{stage, from}];
    if (s.length > 0 && s.last_iteration == iteration) continue;  // a redone round counts once
    // Note [Offences in a row]: the rounds since its latest offence decay
    // the count (none for a late round of an older iteration, counted as the
    // latest round), and a round without an offence ends the run.
    if (s.last_round < round) {
      s.score *= std::pow(kDecayPerRound, static_cast<double>(round - s.last_round));
    }
    s.score += 1;
    if (s.length == 0 || s.last_round + 1 < round) {
      s.length = 1;
    } else if (s.last_round + 1 == round) {
      ++s.length;
    }  // else the same round (an older iteration's, late): the run stands
    s.last_round = round;
    s.last_iteration = iteration;
    if (s.length >= ban_after_ || s.score >= score_ban - 1e-9) {
      reached.push_back(from);
    }
  }
  return reached;
}

double OffenceTally::Score(int stage, const common::NodeId& from) const {
  auto it = streaks_.find({stage, from});
  return it == streaks_.end() ? 0 : it->second.score;
}

int OffenceTally::Run(int stage, const common::NodeId& from) const {
  auto it = streaks_.find({stage, from});
  return it == streaks_.end() ? 0 : it->second.length;
}

}  // namespace skipswarm::node
