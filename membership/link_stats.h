// Smoothed measurements of this node's links to its peers: round-trip time
// from gossip ping/ack pairs and throughput from transfers the pipeline
// transport reports. Both use an exponentially weighted moving average
// (EWMA): new = alpha * sample + (1 - alpha) * old; the first sample is
// taken as is, and so is a throughput sample that follows the previous one
// after more than `throughput_restart_after`: the average of a link that
// carried nothing for that long describes the past (a link that planners
// avoided, Note [Planning from measured links] in
// node/train/scheduler_planner.cc), and the new sample is the only fact
// about the present. Each sample carries when its throughput was last
// measured, apart from the RTT's time, which pings refresh all the time.
//
//   LinkStats stats(/*rtt_alpha=*/0.2, /*throughput_alpha=*/0.3);
//   stats.ObserveRtt(peer, absl::Milliseconds(42), now);
//   stats.ObserveTransfer(peer, 4 << 20, absl::Milliseconds(80), now);
//   for (const proto::LinkSample& s : stats.Samples(self)) ...
//
// Thread rule: thread-compatible (Membership guards it with its mutex).
#ifndef SKIPSWARM_MEMBERSHIP_LINK_STATS_H_
#define SKIPSWARM_MEMBERSHIP_LINK_STATS_H_

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "common/node_id.h"
#include "proto/gossip.pb.h"

namespace skipswarm::membership {

class LinkStats {
 public:
  LinkStats(double rtt_alpha, double throughput_alpha,
            absl::Duration throughput_restart_after = absl::InfiniteDuration())
      : rtt_alpha_(rtt_alpha),
        throughput_alpha_(throughput_alpha),
        throughput_restart_after_(throughput_restart_after) {}

  void ObserveRtt(const common::NodeId& peer, absl::Duration rtt,
                  absl::Time now);
  // `bytes` moved to or from `peer` in `elapsed` (ignored if elapsed <= 0).
  void ObserveTransfer(const common::NodeId& peer, uint64_t bytes,
                       absl::Duration elapsed, absl::Time now);
  void Forget(const common::NodeId& peer);

  // Smoothed RTT to `peer`, or InfiniteDuration when never measured.
  absl::Duration Rtt(const common::NodeId& peer) const;
  // Smoothed bytes/second to `peer`, 0 when never measured.
  double BytesPerSecond(const common::NodeId& peer) const;

  // One LinkSample (from = `self`) per measured peer, sorted by peer id.
  std::vector<proto::LinkSample> Samples(const common::NodeId& self) const;

 private:
  struct Link {
    double rtt_us = -1;  // < 0: unknown
    double bytes_per_second = 0;
    absl::Time measured_at;             // latest sample of either kind
    absl::Time throughput_measured_at;  // latest throughput sample
  };
  double rtt_alpha_;
  double throughput_alpha_;
  absl::Duration throughput_restart_after_;
  absl::flat_hash_map<common::NodeId, Link> links_;
};

}  // namespace skipswarm::membership

#endif  // SKIPSWARM_MEMBERSHIP_LINK_STATS_H_
