// HopStats: what a node observes of its hops (docs/DESIGN.md §5 "Deadlines
// adapt to observed hop times"; the daemon's metrics): per-peer ack
// latencies (send -> the peer's admission ack), from which each frame's ack
// deadline is derived, a latency histogram, and per-peer bytes sent and
// received.
//
//   HopStats stats({});
//   frame.header.set_deadline_ms(absl::ToInt64Milliseconds(stats.Deadline(to)));
//   ... ack after 12 ms ... stats.RecordAck(to, absl::Milliseconds(12));
//
// Note [Hop deadline]: deadline(peer) = clamp(factor x the `quantile` of the
// peer's last `window` ack latencies, min, initial); `initial` until the
// peer has `min_samples` acks. A hung peer (no ack, no broken stream) is
// then given up after a few of its usual hop times instead of a fixed
// constant, and the MB is re-routed (RouteRepairer). The floor keeps a
// loaded 2-core box from timing out healthy hops.
//
// Thread rule: thread-safe.
#ifndef SKIPSWARM_NODE_STAGE_HOP_STATS_H_
#define SKIPSWARM_NODE_STAGE_HOP_STATS_H_

#include <cstdint>
#include <deque>
#include <map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/node_id.h"

namespace skipswarm::node {

struct HopStatsOptions {
  absl::Duration initial = absl::Seconds(10);
  absl::Duration min = absl::Seconds(1);
  double factor = 4.0;
  double quantile = 0.95;
  int window = 64;
  int min_samples = 8;
};

// Prometheus-style latency histogram: counts[i] = acks with latency <=
// bounds_s[i] (cumulative); count / sum_s over all.
struct HopHistogram {
  std::vector<double> bounds_s;
  std::vector<int64_t> cumulative;
  int64_t count = 0;
  double sum_s = 0;
};

struct PeerTraffic {
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  int64_t frames_sent = 0;
  int64_t frames_received = 0;
};

class HopStats {
 public:
  explicit HopStats(HopStatsOptions options);

  void RecordAck(const common::NodeId& peer, absl::Duration latency);
  void RecordSent(const common::NodeId& peer, int64_t bytes);
  void RecordReceived(const common::NodeId& peer, int64_t bytes);

  // Note [Hop deadline].
  absl::Duration Deadline(const common::NodeId& peer) const;

  HopHistogram Histogram() const;
  std::map<common::NodeId, PeerTraffic> Traffic() const;

 private:
  const HopStatsOptions options_;
  mutable absl::Mutex mu_;
  std::map<common::NodeId, std::deque<absl::Duration>> samples_ ABSL_GUARDED_BY(mu_);
  std::map<common::NodeId, PeerTraffic> traffic_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> buckets_ ABSL_GUARDED_BY(mu_);  // not cumulative
  int64_t count_ ABSL_GUARDED_BY(mu_) = 0;
  double sum_s_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_STAGE_HOP_STATS_H_
