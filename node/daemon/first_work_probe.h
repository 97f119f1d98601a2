// FirstWorkProbe: a StageCompute decorator that notes when the node's first
// micro-batch task completes here (a forward, then its backward), for a
// joiner's time-to-first-useful-work (issue 6 acceptance). Everything else
// is forwarded unchanged.
//
//   FirstWorkProbe probe(compute.get(), [&](bool backward) { ... });
//   StageServer server(..., {{stage, &probe}}, ...);
//
// Thread rule: as the wrapped compute; `on_first` runs once per kind
// (forward, backward) on the compute's callback thread.
#ifndef SKIPSWARM_NODE_DAEMON_FIRST_WORK_PROBE_H_
#define SKIPSWARM_NODE_DAEMON_FIRST_WORK_PROBE_H_

#include <atomic>
#include <functional>
#include <string>
#include <utility>

#include "node/compute/stage_compute.h"

namespace skipswarm::node {

class FirstWorkProbe final : public StageCompute {
 public:
  // `inner` must outlive the probe.
  FirstWorkProbe(StageCompute* inner, std::function<void(bool backward)> on_first)
      : inner_(inner), on_first_(std::move(on_first)) {}

  int stage() const override { return inner_->stage(); }
  int64_t num_params() const override { return inner_->num_params(); }
  void Start(uint64_t mb, MicroBatchData data, TensorDone done) override {
    inner_->Start(mb, std::move(data), Wrap(false, std::move(done)));
  }
  void Forward(uint64_t mb, WireTensor input, TensorDone done) override {
    inner_->Forward(mb, std::move(input), Wrap(false, std::move(done)));
  }
  void Tail(uint64_t mb, WireTensor activation, TailDone done) override {
    inner_->Tail(mb, std::move(activation), std::move(done));
  }
  void Backward(uint64_t mb, WireTensor grad_output, TensorDone done) override {
    inner_->Backward(mb, std::move(grad_output), Wrap(true, std::move(done)));
  }
  bool Discard(uint64_t mb) override { return inner_->Discard(mb); }
  size_t pending() const override { return inner_->pending(); }
  absl::StatusOr<GradientSum> TakeGradients() override { return inner_->TakeGradients(); }
  absl::StatusOr<UpdateStats> ApplyUpdate(const std::vector<float>& summed,
                                          int64_t total_visits) override {
    return inner_->ApplyUpdate(summed, total_visits);
  }
  void ZeroGrad() override { inner_->ZeroGrad(); }
  uint64_t ParamsDigest() override { return inner_->ParamsDigest(); }
  int64_t step() const override { return inner_->step(); }
  absl::Status SaveCheckpoint(const std::string& path) override {
    return inner_->SaveCheckpoint(path);
  }
  absl::StatusOr<int64_t> LoadCheckpoint(const std::string& path) override {
    return inner_->LoadCheckpoint(path);
  }
  absl::StatusOr<std::string> ExportState() override { return inner_->ExportState(); }
  absl::StatusOr<int64_t> ImportState(absl::string_view bytes) override {
    return inner_->ImportState(bytes);
  }

 private:
  TensorDone Wrap(bool backward, TensorDone done) {
    std::atomic<bool>& seen = backward ? backward_seen_ : forward_seen_;
    if (seen.load()) return done;
    return [this, backward, &seen, done = std::move(done)](absl::StatusOr<WireTensor> out) mutable {
      const bool ok = out.ok();
      done(std::move(out));
      if (ok && !seen.exchange(true) && on_first_) on_first_(backward);
    };
  }

  StageCompute* const inner_;
  const std::function<void(bool)> on_first_;
  std::atomic<bool> forward_seen_{false};
  std::atomic<bool> backward_seen_{false};
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_FIRST_WORK_PROBE_H_
