// What a daemon measures about itself for the planners (docs/DESIGN.md
// §5 "Cost model"): its compute speed, from the timings of its own
// forward and backward tasks, and the speed of its pipeline hops, from the
// frames it sends. Both go into membership (the record's
// seconds_per_layer_per_sample; Membership::ReportTransfer for the link
// stats every member gossips), so every data node plans from them.
//
//   ComputeSpeedMeter meter({.layers_per_stage = 2, .samples_per_mb = 4});
//   meter.Observe(/*backward=*/false, elapsed);        // each task
//   if (auto v = meter.TakePublishable(clock->SteadyNow())) membership->SetComputeSpeed(*v);
//
//   LinkTimingTransport timed(&grpc_transport, clock, [&](peer, bytes, t) {
//     membership->ReportTransfer(peer, bytes, t);
//   });
//   StageServer server(&timed, ...);
//
// Note [Measured speeds]: the scheduler's cost model (scheduler/
// topology.h) charges c seconds per layer per sample for a forward and
// 1.5 c for a backward. A task's wall time (call -> done, on the compute's
// own thread, queueing included since the node's load is what a planner
// must expect) over layers x samples is one sample of c; a backward's is
// divided by 1.5. The estimate is an exponentially weighted average
// (alpha 0.2), published after 4 tasks and republished (a re-signed
// record, so rarely) once it moved by more than 20% from the published
// value and 10 s have passed since.
// A hop's time is send -> the receiver's admission ack: one round trip
// plus the payload's transfer. bytes / that time is reported as the
// link's throughput, a lower bound (a planner's hop estimate rtt/2 +
// bytes/throughput then over-counts by rtt/2 at most); the round-trip
// time itself stays gossip's ping measurement. Only OK acks count.
//
// Thread rule: ComputeSpeedMeter is thread-safe. LinkTimingTransport is a
// Transport (thread-safe, callbacks as transport.h); `report` runs on the
// transport's threads with no lock held.
#ifndef SKIPSWARM_NODE_DAEMON_REPORTING_SPEED_REPORTS_H_
#define SKIPSWARM_NODE_DAEMON_REPORTING_SPEED_REPORTS_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "node/transport/forwarding_transport.h"

namespace skipswarm::node {

struct ComputeSpeedOptions {
  int layers_per_stage = 1;
  int samples_per_mb = 1;
  double alpha = 0.2;
  // Republish once the estimate moved this much (relative), at most once
  // per interval (every publication re-signs and gossips the record).
  double republish_change = 0.2;
  absl::Duration min_republish_interval = absl::Seconds(10);
  // Samples before the first publication.
  int min_samples = 4;
};

class ComputeSpeedMeter {
 public:
  explicit ComputeSpeedMeter(ComputeSpeedOptions options);

  // One finished task (forward or backward) of one micro-batch.
  void Observe(bool backward, absl::Duration elapsed);
  // Seconds per layer per sample; 0 before any sample.
  double estimate() const;
  // The estimate, when it should be (re)published at `now` (the caller's
  // steady clock; Note [Measured speeds]); marks it published.
  std::optional<double> TakePublishable(absl::Duration now);

 private:
  const ComputeSpeedOptions options_;
  mutable absl::Mutex mu_;
  double estimate_ ABSL_GUARDED_BY(mu_) = 0;
  int samples_ ABSL_GUARDED_BY(mu_) = 0;
  double published_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration published_at_ ABSL_GUARDED_BY(mu_);
};

// Reports every successful hop: `peer`, payload bytes, send -> OK ack.
using HopReport = std::function<void(const PeerId& peer, uint64_t bytes, absl::Duration elapsed)>;

class LinkTimingTransport final : public ForwardingTransport {
 public:
  // Borrows `inner` and `clock` (both must outlive this).
  LinkTimingTransport(Transport* inner, common::Clock* clock, HopReport report);

  void Send(const PeerId& to, Frame frame, SendDone done) override;

 private:
  common::Clock* const clock_;
  const HopReport report_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_REPORTING_SPEED_REPORTS_H_
