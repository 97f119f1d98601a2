// UploadFraction: how much of its pseudo-gradient a replica sends at an
// outer sync (Note [Thinned uploads] in model/avg_codec.h), from the
// uplink figures of the group's last finished round (ReduceResult::
// bandwidths) and, with --outer_overlap, the compute time of the H steps
// the round runs beside.
//
//   double keep = UploadFraction({.own = 50'000, .figures = {50'000, 250'000},
//                                 .bytes = 51'000, .window = absl::Seconds(0.72),
//                                 .floor = 0.25});
//   compute->SetUploadFraction(keep);   // then TakePseudoGradient()
//
// Note [Thinned uploads] (the choice): in a sharded reduce of R members a
// member that owns the share s of the elements uploads the others' parts,
// (1 - s) of its encoded contribution, and its reduced shard to R - 1
// peers, (R - 1) s: with 2 members the whole contribution whatever the cut
// (node/train/README.md). A member whose uplink is k times slower than its
// peers' therefore makes every round k times longer; waited for, the group
// stops for it every sync, and overlapped, once its upload outlasts the H
// steps, the sync points wait for the excess. Only this member's bytes can
// shrink that (a deadline cannot: Note [Late members] in sharded_reduce.h).
// So each member budgets its own upload: the longer of 1.25 x the median
// member's upload time (the slack keeps measurement noise in an even group
// from thinning anyone: two figures of one cap differ by a few percent) and,
// with overlap, 0.8 of the H steps' compute (what the round has before
// anyone waits); when its own upload would take longer it
// thins the parts it sends (its reduced shard stays whole, so the owned
// share is paid in full) to fit, never below `floor`. A member that fits,
// and every member of an even group, sends everything (keep 1: today's
// bytes). The choice is the member's alone: receivers decode whichever
// blocks came (shard_codec.h), and what it held back stays in its error
// feedback, so nothing needs agreeing and no member is left out.
// Unknown figures (the first rounds: the uplink meter needs 256 KiB) keep
// 1.
//
// Thread rule: pure function.
#ifndef SKIPSWARM_NODE_TRAIN_UPLOAD_BUDGET_H_
#define SKIPSWARM_NODE_TRAIN_UPLOAD_BUDGET_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/time/time.h"

namespace skipswarm::node {

struct UploadBudgetInputs {
  uint64_t own = 0;               // this member's uplink figure, bytes/s (0: unknown)
  std::vector<uint64_t> figures;  // every member's, this one included (0: unknown)
  int64_t bytes = 0;              // the whole contribution, encoded
  // With overlap: the compute time of the last H steps; zero: none.
  absl::Duration window = absl::ZeroDuration();
  double floor = 1;  // the smallest fraction; >= 1 (or not a number): always 1
};

// A member within this factor of the median member's upload time is not
// thinned (Note [Thinned uploads]).
inline constexpr double kMedianSlack = 1.25;

// The fraction of its contribution's blocks to send, in [floor, 1].
inline double UploadFraction(const UploadBudgetInputs& in) {
  if (!(in.floor < 1) || in.own == 0 || in.bytes <= 0 || in.figures.size() < 2) return 1;
  const double floor = std::max(in.floor, 1e-3);
  std::vector<double> known;
  double largest = 0;
  for (uint64_t f : in.figures) {
    if (f == 0) return 1;
    known.push_back(static_cast<double>(f));
    largest = std::max(largest, known.back());
  }
  // The shard this member owns, as ShardLayout::FromBandwidths cuts it
  // (figures raised to an eighth of the largest).
  double sum = 0;
  for (double f : known) sum += std::max(f, largest / 8);
  const double r = static_cast<double>(known.size());
  const double own = static_cast<double>(in.own);
  const double share = std::max(own, largest / 8) / sum;
  const double bytes = static_cast<double>(in.bytes);
  const double parts = (1 - share) * bytes, gather = (r - 1) * share * bytes;
  // The median member's upload with equal shards: 2 (R - 1) / R of its
  // contribution.
  std::sort(known.begin(), known.end());
  const double median_s = 2 * (r - 1) / r * bytes / known[known.size() / 2];
  const double budget_s =
      std::max(kMedianSlack * median_s, 0.8 * absl::ToDoubleSeconds(in.window));
  if ((parts + gather) / own <= budget_s || parts <= 0) return 1;
  const double keep = (budget_s * own - gather) / parts;
  return std::isfinite(keep) ? std::clamp(keep, floor, 1.0) : 1;
}

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_UPLOAD_BUDGET_H_
