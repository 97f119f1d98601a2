// SilentLossTracker: which relays a data node stops routing through for a
// while because micro-batches sent through them vanish silently (Note
// [Silent relay exclusion]). ExcludingView: the data node's SwarmView as its
// planner sees it, without those relays.
//
//   SilentLossTracker tracker(options, seed);
//   // at the end of each iteration, from the planned routes:
//   for (const auto& e : tracker.EndIteration(lost_relays, completed_relays, now))
//     LOG(WARNING) << e.relay << " excluded for " << e.duration;
//   ExcludingView planning(view, tracker.ExcludedAt(now));
//   planner->Plan(input, planning);
//
// Note [Silent relay exclusion]: a relay whose compute hangs but whose
// process still acks frames and answers gossip stays alive in every view,
// and the data node's own MB deadline (Note [MB deadline] in
// data_node_driver.h) is the only thing that ends the MBs routed through
// it, each such iteration costing up to deadline_factor x the healthy
// deadline. The data node knows each MB's planned route, so it attributes:
//  - an MB abandoned at the driver's own deadline (timed out, not a drop
//    the server reported: those have a known cause and are re-routed or
//    reported by the hops) was lost at one of the relays on its route;
//  - a relay on the route of a completed MB in the same iteration is
//    cleared (it works; the loss was elsewhere on the route);
//  - a relay on the route of a silently lost MB and of no completed one is
//    a suspect of that iteration, if the iteration completed any MB; in
//    one that completed none, see Note [Nothing completed] below;
//    `iterations_to_exclude` suspect
//    iterations in a row (iterations where it carried no MB do not break
//    the run: they say nothing) exclude it from this data node's plans for
//    a back-off (exponential, jittered, capped: common::Backoff). When the
//    back-off ends it is planned again; one more suspect iteration then
//    excludes it again for the next, longer back-off; one completed MB
//    through it forgets it (back-off reset).
// The verdict is local to this data node's planning. It is not
// SwarmView::MarkDead: that verdict also takes the member out of the
// stage servers' re-routing and out of replica averaging, and the
// daemon's views keep it until the member re-signs; a relay that is only
// slow must keep its replica's place in averaging and be tried again.
// ExcludingView never hides the last pipeline replica of a stage: then
// nothing could be planned at all; the relay stays planned and the
// deadline handles it. Nor does it hide a data node (stage 0 host): the
// data order ranks over them. Other data nodes plan on their own and may
// still route through the relay until their own MBs show the loss.
//
// Note [Nothing completed]: an iteration that completed no MB has no
// route to compare with. Blaming every relay it routed through excluded
// healthy replicas with the silent one (the view then kept an arbitrary
// one per stage), so it used to be no evidence at all; but then a data
// node whose every route passed the hung relay (its planner's choice: the
// simulator's nl-s0-0, whose link to the other replica is slow) never
// excluded it and lost every MB for as long as the relay hung. Now such an
// iteration makes a suspect of ONE relay: the first, in route order, of
// the relays on EVERY lost route. Only a relay every lost route passes
// explains every loss alone (one a lost route avoided does not), and of
// those the first is the one every MB reached: when it hangs, the later
// ones may never have seen a frame. Blaming all of them (a first version)
// excluded nl-s0-0's healthy stage-2 relay with the hung stage-1 one, and
// the plan around both crossed nl-s0-0's slow link four times per MB
// instead of twice: every MB outlasted the deadline (61 of 96 MBs instead
// of 73, node/train/README.md). When the first is healthy and a later one
// hangs, the first is excluded for one back-off in vain, the plan around
// it loses every MB again, and the later relay is then the first shared
// one. The rule holds only when every relay on every lost route could be
// planned around: if one is the last planned replica of a stage it hosts
// (in the view the iteration was planned on, so without the relays
// already excluded), that one alone may explain the losses (a stage whose
// only host is slow, not hung, loses every MB at the deadline too) and
// nothing could route around it, so the iteration stays no evidence and
// nobody is blamed. A relay convicted this way is forgotten, as always, by
// one MB through it that completes.
//
// Note [Exclusion in iterations]: the back-off is wall time (30 s first),
// but what a retry of a still-silent relay costs is iterations: one
// iteration's MBs through it, lost at the deadline. Where an iteration
// lasts longer than the back-off (the simulator's WAN scenarios: 72 s per
// iteration for nl-s0-0 once it routes around the hung relay), every
// other iteration retried the hung relay and lost all its MBs, at a
// deadline grown on the slower routes (288 s per retry). So an exclusion
// ends only when both its back-off and `min_iterations` x 2^(exclusions
// - 1) iterations of this data node have passed.
//
// Thread rule: SilentLossTracker is thread-compatible (the driver calls it
// under its lock); ExcludingView is immutable after construction and
// borrows `base`, which must outlive it.
#ifndef SKIPSWARM_NODE_TRAIN_SILENT_LOSS_TRACKER_H_
#define SKIPSWARM_NODE_TRAIN_SILENT_LOSS_TRACKER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "common/backoff.h"
#include "common/node_id.h"
#include "node/stage/swarm_view.h"

namespace skipswarm::node {

// Exclusion back-offs: 30 s, then doubling, jittered down by up to half,
// at most 10 minutes.
common::BackoffOptions DefaultExclusionBackoff();

struct SilentLossOptions {
  // Suspect iterations in a row that exclude a relay; <= 0: never exclude.
  int iterations_to_exclude = 2;
  common::BackoffOptions backoff = DefaultExclusionBackoff();
  // An exclusion also lasts at least this many of the data node's
  // iterations, doubling with each exclusion as the back-off does (up to
  // backoff.max / backoff.initial times this): Note [Exclusion in
  // iterations]. <= 0: the back-off's time only.
  int min_iterations = 4;
};

class SilentLossTracker {
 public:
  // `seed` draws the back-offs' jitter.
  SilentLossTracker(SilentLossOptions options, uint64_t seed)
      : options_(options), seed_(seed) {}

  struct Exclusion {
    common::NodeId relay;
    absl::Duration duration;  // excluded until now + duration
    int times = 0;            // exclusions since it last completed an MB
  };
  // What an iteration that completed no MB adds (Note [Nothing
  // completed]): the relays on every lost MB's planned route, in route
  // order, and the relays of the iteration's routes that were the last
  // planned replica of a stage they host (LastReplicas).
  struct NothingCompleted {
    std::vector<common::NodeId> on_every_lost_route;
    absl::flat_hash_set<common::NodeId> last_replicas;
  };
  // One finished iteration: `lost` holds the relays on the planned routes
  // of the MBs abandoned at the driver's deadline, `completed` those on the
  // routes of the completed MBs; `nothing` is read only when `completed`
  // is empty. Returns the relays this call excluded.
  std::vector<Exclusion> EndIteration(const absl::flat_hash_set<common::NodeId>& lost,
                                      const absl::flat_hash_set<common::NodeId>& completed,
                                      absl::Duration now, const NothingCompleted& nothing = {});
  // Relays excluded at `now`, ascending id.
  std::vector<common::NodeId> ExcludedAt(absl::Duration now) const;

 private:
  struct Relay;
  bool Excluded(const Relay& r, absl::Duration now) const;
  struct Relay {
    explicit Relay(const common::BackoffOptions& o, uint64_t seed) : backoff(o, seed) {}
    int streak = 0;  // suspect iterations in a row
    common::Backoff backoff;
    absl::Duration until;  // excluded while now < until
    int64_t until_iteration = 0;  // or while iterations_ < until_iteration
    bool convicted = false;  // excluded before, no completed MB since
  };
  const SilentLossOptions options_;
  std::map<common::NodeId, Relay> relays_;  // suspects and convicted only
  const uint64_t seed_;
  uint64_t seeds_ = 0;  // relays seeded so far
  int64_t iterations_ = 0;  // EndIteration calls so far
};

// The relays of `relays` that are the last live pipeline replica, in
// `planning`, of a stage > 0 they host, or that host stage 0 (a data node:
// never hidden either). Note [Nothing completed].
absl::flat_hash_set<common::NodeId> LastReplicas(const SwarmView& planning,
                                                 const absl::flat_hash_set<common::NodeId>& relays);

// `base` without the relays of `excluded` it may hide (Note [Silent relay
// exclusion]) and without every node of `always` (Note [Stopping drops] in
// data_node_driver.h: a stage's last replica too, which `excluded` keeps):
// neither listed as replicas nor alive; Members() still lists them (it
// lists dead members too). MarkDead does nothing.
class ExcludingView final : public SwarmView {
 public:
  ExcludingView(const SwarmView& base, const std::vector<common::NodeId>& excluded,
                std::vector<common::NodeId> always = {});

  // The relays of `excluded` this view hides, and those it keeps (the last
  // replica of a stage left by `always` and the hidden, a data node),
  // ascending id.
  const std::vector<common::NodeId>& hidden() const { return hidden_; }
  const std::vector<common::NodeId>& kept() const { return kept_; }

  std::vector<PeerInfo> Members() const override { return base_.Members(); }
  bool IsAlive(const common::NodeId& id) const override;
  std::vector<common::NodeId> Replicas(int stage) const override;
  void MarkDead(const common::NodeId& id) override { (void)id; }
  uint64_t version() const override { return base_.version(); }
  std::optional<LinkEstimate> Link(const common::NodeId& from,
                                   const common::NodeId& to) const override {
    return base_.Link(from, to);
  }
  std::optional<uint64_t> StopAfter(const common::NodeId& id) const override {
    return base_.StopAfter(id);
  }
  std::optional<uint64_t> Incarnation(const common::NodeId& id) const override {
    return base_.Incarnation(id);
  }

 private:
  bool Hidden(const common::NodeId& id) const;
  const SwarmView& base_;
  std::vector<common::NodeId> always_;  // sorted
  std::vector<common::NodeId> hidden_, kept_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_SILENT_LOSS_TRACKER_H_
