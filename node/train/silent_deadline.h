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
// kSamples completed waits, never under the floor nor above max(initial,
// floor) (Note [Silent ceiling]); the initial value before any wait
// completed. A wait that ended by dropping a silent member must not be
// recorded: it lasted the deadline itself, and counting it multiplied the
// deadline by the factor at every drop.
//
// Note [Silent ceiling]: as the data node's MB deadline (Note [MB
// deadline] in data_node_driver.h), the deadline never exceeds its
// ceiling, max(initial, floor), 5 min by default. Without it one long
// wait that completed (a data node whose iteration ran long within its
// stated bound, its micro-batches run to their deadlines, that then
// arrived; or a member held just under the deadline) set
// the deadline to factor x that wait for the next kSamples waits: the next
// member to go silent held its group 2 h after a 30 min wait, past
// anything any member stated, and waits that each completed just under the
// deadline raised it factor-fold every time, without bound. What the
// ceiling leaves each kind of wait:
//  * A data node that stated a bound: a barrier drops it only once
//    kStatedBoundFactor x its counted statement has passed too
//    (StatedDropTime). The ceiling bounds only the measured part, so an
//    honest slow data node passes however far its iterations run past
//    the ceiling: its statement is capped at MaxHonestIterationBound, the
//    most an honest one states, and Note [Stated pace] never counts an
//    honest statement as less than it states.
//  * A data node that never stated (in the daemons: a joiner before its
//    first barrier, a peer of an older version): the ceiling; dropped, it
//    re-enters as before, when the measured deadline was less.
//  * An averaging round, over slow links too: up to the ceiling (from its
//    first contribution in the hub, from this member's in the daemons)
//    before members whose parts are still missing are dropped, and factor
//    x its recent waits below that. That is what a fresh group's first
//    round had (the initial value before any sample; after a barrier
//    completed, factor x its wait or the floor, usually less), so a swarm
//    whose rounds completed from the start still completes them, with a
//    margin of factor x until factor x the slowest reaches the ceiling; it
//    loses only the unbounded growth a chain of slowing rounds could ride.
//    In an outer sync with a deadline, a member slower than its peers is
//    closed out of the round at that deadline instead (Note [Late
//    members] in sharded_reduce.h: close_after from the measured links; it
//    gets the result and stays in the group). A swarm whose rounds need
//    longer than 5 min sets a larger `initial`.
//
// Thread rule: not thread-safe; the owner's lock guards it.
#ifndef SKIPSWARM_NODE_TRAIN_SILENT_DEADLINE_H_
#define SKIPSWARM_NODE_TRAIN_SILENT_DEADLINE_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>

#include "absl/time/time.h"

namespace skipswarm::node {

struct SilentDeadlineOptions {
  // Also the ceiling, unless the floor is larger (Note [Silent ceiling]).
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
    // Note [Silent ceiling].
    const absl::Duration ceiling = std::max(options_.initial, options_.floor);
    return std::min(ceiling, std::max(options_.floor, slowest * options_.factor));
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
// next iteration: `bound` (as it counts: Note [Stated pace]), counted from
// `released` (clock time), when the barrier it was made at released it.
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

// Note [Stated pace]: a statement is a data node's word, and the cap
// below (MaxHonestIterationBound) is the largest an honest data node of
// the swarm's settings could ever state, 40 min by default: a data node
// that states the cap and then hangs, or a hostile one that answers probes
// and never sends, held every barrier, so the whole swarm, 2 x that (80
// min), where the measured rule alone dropped it in under a minute. So a
// statement counts at most what that data node's own recent pace allows:
//
//   min(stated, max(floor, factor x its slowest recent span,
//                   its largest recent counted statement))
//
// a span being the time from a barrier's release of the data node to its
// arrival at the next barrier (what a statement bounds), over the last
// kSamples spans and counted statements; with no span yet (start-up, or
// just back after a drop) the statement counts whole (up to the cap).
// Why an honest data node is never cut (DataNodeDriver::NextIterationBound
// states its MB deadline D x (waves + 1), Note [MB deadline] in
// data_node_driver.h): the D it states at a barrier is max(min_deadline,
// deadline_factor x the slowest sample of the iteration just run), or the
// previous D when that iteration had no sample; a sample is a round trip
// that completed or one abandoned at its deadline, so it lasted at most
// that iteration, which lies within the span just ended. So each honest
// statement is at most max((waves + 1) x min_deadline, deadline_factor x
// (waves + 1) x the span just ended, its previous statement): with
// factor = deadline_factor x (M + 1) and floor = min_deadline x (M + 1)
// (waves <= M, StatedPaceFor) the rule never lowers it, however slow, and
// however suddenly it slows (a replica died and its MBs run to their
// deadline), since the deadline it works to is the one it states. The
// start-up statement (initial_deadline x (waves + 1)) has no span before
// it and counts whole. A data node that ran fast and then states the cap
// and hangs counts as stating factor x its slowest recent span (or its
// largest recent honest statement, if larger): with the defaults (f = 4,
// M = 4: factor 20, floor 25 s) one whose spans were 5 s is dropped 2 x
// 100 s after its release, not 80 min. Worst case: a hung data node holds
// the barriers 2 x max(floor, factor x the slowest of its last kSamples
// spans, the largest of its last kSamples counted statements), never more
// than 2 x the cap; in its first kSamples iterations that includes the
// start-up statement (10 min by default). A node that slows on purpose,
// each span just under 2 x what it may state, can still raise what it may
// state factor-fold per iteration: the rule bounds hangs, not slowness. In
// the daemons spans are measured by each member from its own barrier
// completion to the data node's message, so they differ from the data
// node's own by the barrier messages' skew (milliseconds; the floor and
// kStatedBoundFactor cover it). A dropped data node starts afresh
// (Forget): the span it was dropped in lasted the hang and is no sample,
// and without it its next honest statement has no span to follow from, so
// that one counts whole, as at start-up. A barrier drops a data node only
// once another data node arrived, so the rule applies only while others
// live.
struct StatedPaceOptions {
  double factor = 20.0;                    // <= 0: statements count as stated
  absl::Duration floor = absl::Seconds(25);
};
// The rule's options for data nodes with these DriverOptions (the
// daemons': the same as MaxHonestIterationBound's).
inline StatedPaceOptions StatedPaceFor(absl::Duration min_deadline, double deadline_factor,
                                       int mbs_per_iteration) {
  const double factor = deadline_factor >= 1.0 ? deadline_factor : 1.0;  // NaN: 1 too
  const int64_t waves = std::max(1, mbs_per_iteration);
  return StatedPaceOptions{factor * static_cast<double>(waves + 1),
                           std::max(absl::ZeroDuration(), min_deadline) * (waves + 1)};
}

// Note [Stated pace]: one data node's recent spans and counted statements.
// Thread rule: not thread-safe; the owner's lock guards it.
class StatedPace {
 public:
  static constexpr size_t kSamples = 4;

  // What `stated` counts as (never above it, never below zero).
  absl::Duration Limit(absl::Duration stated, const StatedPaceOptions& options) const {
    stated = std::max(absl::ZeroDuration(), stated);
    if (options.factor <= 0 || spans_.empty()) return stated;
    absl::Duration allowed = options.floor;
    for (absl::Duration s : spans_) allowed = std::max(allowed, s * options.factor);
    for (absl::Duration b : counted_) allowed = std::max(allowed, b);
    return std::min(stated, allowed);
  }
  // A statement is released at `at`, counting as `counted` (Limit's).
  void Released(absl::Duration counted, absl::Duration at) {
    Push(counted_, counted);
    open_ = at;
  }
  // The data node arrived at the next barrier at `at`: the span since its
  // last release is a sample (once).
  void Arrived(absl::Duration at) {
    if (!open_.has_value()) return;
    Push(spans_, std::max(absl::ZeroDuration(), at - *open_));
    open_.reset();
  }
  // The data node was dropped: it starts afresh.
  void Forget() {
    spans_.clear();
    counted_.clear();
    open_.reset();
  }
  bool has_pace() const { return !spans_.empty(); }

 private:
  static void Push(std::deque<absl::Duration>& q, absl::Duration d) {
    q.push_back(d);
    while (q.size() > kSamples) q.pop_front();
  }
  std::deque<absl::Duration> spans_;
  std::deque<absl::Duration> counted_;
  std::optional<absl::Duration> open_;
};

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
// if that is larger: the cap takes that. The driver also holds every
// deadline to its ceiling (Note [MB deadline]): max(initial_deadline,
// min_deadline), or up to deadline_factor x that when its plan predicts
// slow routes (each prediction capped there), so an honest statement is at
// most the cap, with a margin of deadline_factor when no prediction is
// that slow; a data node that states more is
// capped and dropped only if it is silent for kStatedBoundFactor x the
// cap. Defaults:
// 480 s x (4 + 1) = 40 min, so a hung data node that answers probes holds
// a barrier at most 80 min, and once it has a pace far less (Note [Stated
// pace]). Never above kMaxStatedBoundCeiling (a day), so
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
