// FirstWorkProbe: a StageCompute decorator that notes when the node's first
// micro-batch task completes here (a forward, then its backward), for a
// joiner's time-to-first-useful-work (node/daemon/README.md), and, with a
// clock, times every forward and backward task (call -> done) for the
// node's measured compute speed (speed_reports.h). Everything else is
// forwarded unchanged.
//
//   FirstWorkProbe probe(compute.get(), [&](bool backward) { ... },
//                        clock, [&](bool backward, absl::Duration t) { ... });
//   StageServer server(..., {{stage, &probe}}, ...);
//
// Thread rule: as the wrapped compute; `on_first` runs once per kind
// (forward, backward) and `on_timed` once per successful task, on the
// compute's callback thread.
#ifndef SKIPSWARM_NODE_DAEMON_GOSSIP_FIRST_WORK_PROBE_H_
#define SKIPSWARM_NODE_DAEMON_GOSSIP_FIRST_WORK_PROBE_H_

#include <atomic>
#include <functional>
#include <string>
#include <utility>

#include "absl/time/time.h"
#include "common/clock.h"
#include "node/compute/forwarding_stage_compute.h"

namespace skipswarm::node {

class FirstWorkProbe final : public ForwardingStageCompute {
 public:
  // `inner` (and `clock`, when given) must outlive the probe.
  FirstWorkProbe(StageCompute* inner, std::function<void(bool backward)> on_first,
                 common::Clock* clock = nullptr,
                 std::function<void(bool backward, absl::Duration elapsed)> on_timed = nullptr)
      : ForwardingStageCompute(inner),
        on_first_(std::move(on_first)),
        clock_(clock),
        on_timed_(clock != nullptr ? std::move(on_timed) : nullptr) {}

  void Start(uint64_t mb, MicroBatchData data, TensorDone done) override {
    inner()->Start(mb, std::move(data), Wrap(false, std::move(done)));
  }
  void Forward(uint64_t mb, WireTensor input, TensorDone done) override {
    inner()->Forward(mb, std::move(input), Wrap(false, std::move(done)));
  }
  void Backward(uint64_t mb, WireTensor grad_output, TensorDone done) override {
    inner()->Backward(mb, std::move(grad_output), Wrap(true, std::move(done)));
  }

 private:
  TensorDone Wrap(bool backward, TensorDone done) {
    std::atomic<bool>& seen = backward ? backward_seen_ : forward_seen_;
    if (seen.load() && !on_timed_) return done;
    const absl::Duration started = clock_ != nullptr ? clock_->SteadyNow() : absl::ZeroDuration();
    return [this, backward, &seen, started,
            done = std::move(done)](absl::StatusOr<WireTensor> out) mutable {
      const bool ok = out.ok();
      if (ok && on_timed_) on_timed_(backward, clock_->SteadyNow() - started);
      done(std::move(out));
      if (ok && !seen.exchange(true) && on_first_) on_first_(backward);
    };
  }

  const std::function<void(bool)> on_first_;
  common::Clock* const clock_;
  const std::function<void(bool, absl::Duration)> on_timed_;
  std::atomic<bool> forward_seen_{false};
  std::atomic<bool> backward_seen_{false};
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_GOSSIP_FIRST_WORK_PROBE_H_
