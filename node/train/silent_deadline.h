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

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_SILENT_DEADLINE_H_
