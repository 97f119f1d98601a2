// How long a replica group waits for a member that answers probes but
// sends nothing before it drops that member (Note [Silent members] in
// grpc_group_sweep.cc, Note [Silent members in the hub] in inproc_group.h):
// both groups, the daemons' and the simulator's, use this one rule.
//
//   SilentDeadline silent(SilentDeadlineOptions{});
//   clock->RunAfter(silent.Get(), drop_the_silent);
//   silent.Record(wait);   // a completed wait, never one that ended in a drop
//
// The deadline follows measured waits: factor x the slowest of the last
// kSamples completed waits, never under the floor; the initial value
// before any wait completed. A wait that ended by dropping a silent member
// must not be recorded: it lasted the deadline itself, and counting it
// multiplied the deadline by the factor at every drop.
//
// Thread rule: not thread-safe; the owner's lock guards it.
#ifndef SKIPSWARM_NODE_TRAIN_SILENT_DEADLINE_H_
#define SKIPSWARM_NODE_TRAIN_SILENT_DEADLINE_H_

#include <algorithm>
#include <cstddef>
#include <deque>
#include <optional>

#include "absl/time/time.h"

namespace skipswarm::node {

struct SilentDeadlineOptions {
  absl::Duration initial = absl::Minutes(5);
  absl::Duration floor = absl::Seconds(30);
  // <= 0: no deadline (enabled() is false; Get() is not to be used).
  double factor = 4.0;
};

class SilentDeadline {
 public:
  static constexpr size_t kSamples = 16;

  explicit SilentDeadline(SilentDeadlineOptions options = {}) : options_(options) {}

  bool enabled() const { return options_.factor > 0; }
  absl::Duration Get() const {
    if (waits_.empty()) return options_.initial;
    const absl::Duration slowest = *std::max_element(waits_.begin(), waits_.end());
    return std::max(options_.floor, slowest * options_.factor);
  }
  void Record(absl::Duration wait) {
    waits_.push_back(wait);
    while (waits_.size() > kSamples) waits_.pop_front();
  }

 private:
  SilentDeadlineOptions options_;
  std::deque<absl::Duration> waits_;
};

// Note [Stated bounds] (inproc_group.h): a data node's statement on its
// next iteration: `bound`, counted from `released` (clock time), when the
// barrier it was made at released it.
inline constexpr double kStatedBoundFactor = 2.0;
struct StatedBound {
  absl::Duration bound;
  absl::Duration released;
};

// The clock time from which a barrier may drop a data node that has not
// arrived: once both `measured` (the barrier's first arrival + the
// measured deadline) and kStatedBoundFactor x its last released statement
// have passed. A data node with no released statement: `unstated`, the
// group's choice (the hub: never; the daemons: `measured`). Both groups,
// the daemons' and the simulator's, use this one rule.
inline absl::Duration StatedDropTime(absl::Duration measured,
                                     const std::optional<StatedBound>& stated,
                                     absl::Duration unstated) {
  if (!stated.has_value()) return unstated;
  return std::max(measured, stated->released + stated->bound * kStatedBoundFactor);
}

// Note [Stated bounds in the daemons] (grpc_group_sweep.cc): the cap on a
// peer's statement (GrpcGroupOptions::max_stated_bound), made of the
// quantities DataNodeDriver::NextIterationBound states: its MB deadline x
// (waves + 1), waves = ceil(M / its memory slots). The arguments are the
// data nodes' DriverOptions (the daemons do not change them; M is
// --node_mbs: the manifest's in a gossip swarm, each node's flag with a
// static --swarm list, taken to be the same). Memory slots are each
// node's own choice (>= 1), so the cap takes the most waves, M. The MB
// deadline (Note [MB deadline] in data_node_driver.h) is initial_deadline
// first, then max(min_deadline, deadline_factor x a sample), a sample
// being a completed round trip or an abandoned one counted as at most
// max(the healthy deadline, initial_deadline). For a data node whose
// micro-batches complete within initial_deadline / deadline_factor (30 s
// by default) every sample is at most max(initial_deadline, min_deadline),
// so its deadline is at most deadline_factor x that (480 s), min_deadline
// if that is larger: the cap takes that. The deadline has no hard ceiling: a data
// node whose micro-batches take longer may state more and is capped; it is
// dropped only if it is silent for kStatedBoundFactor x the cap. Defaults:
// 480 s x (4 + 1) = 40 min, so a hung data node that answers probes holds
// a barrier at most 80 min. Never above kMaxStatedBoundCeiling (a day), so
// the cap stays finite whatever the settings.
inline constexpr absl::Duration kMaxStatedBoundCeiling = absl::Hours(24);
inline absl::Duration MaxHonestIterationBound(absl::Duration initial_deadline,
                                              absl::Duration min_deadline,
                                              double deadline_factor,
                                              int mbs_per_iteration) {
  const double factor = deadline_factor >= 1.0 ? deadline_factor : 1.0;  // NaN: 1 too
  const absl::Duration start = std::max(initial_deadline, min_deadline);
  const absl::Duration deadline = std::max(min_deadline, start * factor);
  const int waves = std::max(1, mbs_per_iteration);
  const absl::Duration cap = deadline * (static_cast<int64_t>(waves) + 1);
  return std::clamp(cap, absl::ZeroDuration(), kMaxStatedBoundCeiling);
}

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_SILENT_DEADLINE_H_
