#include "node/stage/verify_pick.h"

#include <algorithm>
#include <vector>

namespace skipswarm::node {

// Note [Verify sampling]
// Members on probation are checked at `rate`, only against trusted
// replicas: a mismatch then has one culprit (the newcomer; a trusted
// member's sketch is believed), which is what makes it actionable (Note
// [Newcomer probation]). Trusted members are checked too, at the lower
// `trusted_rate`, against another trusted replica: one mismatch there says
// that one of the two lied, not which; Note [Trusted disputes] in
// verify_trust.h attributes them across partners. The coin is per micro-batch and drawn after the
// candidates are known, so `rate` is the share of a newcomer's micro-batches
// that are checked (the cost: that share of one stage forward on Y and one
// extra activation upload here), and nothing is drawn on the hot path of a
// trusted X. The seed comes from the same seeded generator: X cannot
// predict it because it is sent only to Y, and a different one every check
// means a liar cannot learn the sketch's null space from past checks.
std::optional<VerifyPick> PickVerifier(const PeerInfo& x, int stage,
                                       absl::Span<const PeerInfo> replicas, double rate,
                                       common::Random& rng, double trusted_rate) {
  if (!x.on_probation) rate = trusted_rate;
  if (!(rate > 0)) return std::nullopt;
  std::vector<const PeerInfo*> candidates;
  for (const PeerInfo& p : replicas) {
    if (p.id == x.id || p.on_probation || p.subnetwork || !p.verify_frames) continue;
    if (std::find(p.stages.begin(), p.stages.end(), stage) == p.stages.end()) continue;
    candidates.push_back(&p);
  }
  if (candidates.empty()) return std::nullopt;
  if (rate < 1 && !rng.Bernoulli(rate)) return std::nullopt;
  const int64_t i = rng.UniformInt(0, static_cast<int64_t>(candidates.size()) - 1);
  VerifyPick pick;
  pick.verifier = candidates[static_cast<size_t>(i)]->id;
  pick.seed = rng();
  return pick;
}

}  // namespace skipswarm::node
