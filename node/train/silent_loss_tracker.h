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
//    a suspect of that iteration, if the iteration completed any MB (one
//    that completed none cannot tell the silent relay from the healthy
//    ones: it is no evidence); `iterations_to_exclude` suspect
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
  // One finished iteration: `lost` holds the relays on the planned routes
  // of the MBs abandoned at the driver's deadline, `completed` those on the
  // routes of the completed MBs. Returns the relays this call excluded.
  std::vector<Exclusion> EndIteration(const absl::flat_hash_set<common::NodeId>& lost,
                                      const absl::flat_hash_set<common::NodeId>& completed,
                                      absl::Duration now);
  // Relays excluded at `now`, ascending id.
  std::vector<common::NodeId> ExcludedAt(absl::Duration now) const;

 private:
  struct Relay {
    explicit Relay(const common::BackoffOptions& o, uint64_t seed) : backoff(o, seed) {}
    int streak = 0;  // suspect iterations in a row
    common::Backoff backoff;
    absl::Duration until;  // excluded while now < until
    bool convicted = false;  // excluded before, no completed MB since
  };
  const SilentLossOptions options_;
  std::map<common::NodeId, Relay> relays_;  // suspects and convicted only
  const uint64_t seed_;
  uint64_t seeds_ = 0;  // relays seeded so far
};

// `base` without the relays of `excluded` it may hide (Note [Silent relay
// exclusion]): neither listed as replicas nor alive; Members() still lists
// them (it lists dead members too). MarkDead does nothing.
class ExcludingView final : public SwarmView {
 public:
  ExcludingView(const SwarmView& base, const std::vector<common::NodeId>& excluded);

  // The excluded relays this view hides, and those it keeps (the last
  // replica of a stage, a data node), ascending id.
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

 private:
  bool Hidden(const common::NodeId& id) const;
  const SwarmView& base_;
  std::vector<common::NodeId> hidden_, kept_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_SILENT_LOSS_TRACKER_H_
