#include "node/train/offence_tally.h"

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
  for (const common::NodeId& from : offenders) {
    Streak& s = streaks_[{stage, from}];
    if (s.length > 0 && s.last == iteration) continue;  // a redone round counts once
    // Note [Offences in a row]: a round without an offence ends the run.
    s.length = s.length > 0 && s.last + 1 == iteration ? s.length + 1 : 1;
    s.last = iteration;
    if (s.length >= ban_after_) reached.push_back(from);
  }
  return reached;
}

int OffenceTally::Run(int stage, const common::NodeId& from) const {
  auto it = streaks_.find({stage, from});
  return it == streaks_.end() ? 0 : it->second.length;
}

}  // namespace skipswarm::node
