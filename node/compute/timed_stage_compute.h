// TimedStageCompute: a StageCompute with no maths. Every task completes
// after its modelled duration on the injected clock (docs/DESIGN.md §5 cost
// model: forward c, backward 1.5 c, tail 0.25 c), and outputs are dummy
// payloads of a configured size so transports and shapers see realistic
// byte counts. The simulator runs hundreds of real nodes on it.
//
//   TimedStageCompute::Options o{.stage = 2, .forward = absl::Milliseconds(440)};
//   TimedStageCompute compute(&sim_clock, o);
//   compute.Forward(mb, std::move(x), done);    // done runs 440 ms later
//
// Bookkeeping is real: pending MBs, duplicate and unknown-MB errors, visits,
// steps and a digest that depends on the stage and the step count, so node
// logic (slots, drops, replica agreement) is exercised unchanged. A
// checkpoint is a real (tiny) file holding the stage and step, written
// atomically, so the daemons' checkpoint files are exercised too.
//
// Thread rule: thread-safe; `done` runs as a clock timer with no lock held.
// The clock must outlive every pending timer.
#ifndef SKIPSWARM_NODE_COMPUTE_TIMED_STAGE_COMPUTE_H_
#define SKIPSWARM_NODE_COMPUTE_TIMED_STAGE_COMPUTE_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "node/compute/stage_compute.h"

namespace skipswarm::node {

class TimedStageCompute final : public StageCompute {
 public:
  struct Options {
    int stage = 0;
    absl::Duration forward = absl::Milliseconds(10);  // c: one forward
    double backward_factor = 1.5;
    double tail_factor = 0.25;
    uint64_t payload_bytes = 1024;  // bytes of each activation / gradient
    int64_t num_params = 16;        // length of the dummy gradient
  };

  TimedStageCompute(common::Clock* clock, Options options);

  int stage() const override { return options_.stage; }
  int64_t num_params() const override { return options_.num_params; }
  void Start(uint64_t mb, MicroBatchData data, TensorDone done) override;
  void Forward(uint64_t mb, WireTensor input, TensorDone done) override;
  void Tail(uint64_t mb, WireTensor activation, TailDone done) override;
  void Backward(uint64_t mb, WireTensor grad_output, TensorDone done) override;
  // After one forward (SketchBackward: a forward and a backward), a sketch
  // of the dummy output: Dummy()'s shape, zero projections and norm, so a
  // check of a timed output against it matches.
  void SketchForward(WireTensor input, uint64_t seed, SketchDone done) override;
  void SketchBackward(WireTensor input, WireTensor grad_output, uint64_t seed,
                      SketchDone done) override;
  bool Discard(uint64_t mb) override;
  size_t pending() const override;
  absl::StatusOr<GradientSum> TakeGradients() override;
  absl::StatusOr<UpdateStats> ApplyUpdate(const std::vector<float>& summed,
                                          int64_t total_visits) override;
  void ZeroGrad() override;
  uint64_t ParamsDigest() override;
  int64_t step() const override;
  absl::Status SaveCheckpoint(const std::string& path) override;
  absl::StatusOr<int64_t> LoadCheckpoint(const std::string& path) override;
  absl::StatusOr<std::string> ExportState() override;
  absl::StatusOr<int64_t> ImportState(absl::string_view bytes) override;

 private:
  // Adds `mb` to the pending set; ALREADY_EXISTS if it is there.
  absl::Status Admit(uint64_t mb);
  WireTensor Dummy() const;
  void FinishSketch(absl::Duration after, uint64_t seed, SketchDone done);
  void Finish(absl::Duration after, TensorDone done, absl::StatusOr<WireTensor> out);

  common::Clock* const clock_;
  const Options options_;
  const std::string* payload_;  // shared zero bytes, never freed

  mutable absl::Mutex mu_;
  absl::flat_hash_set<uint64_t> pending_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<uint64_t> started_ ABSL_GUARDED_BY(mu_);  // stage 0: awaiting Tail
  int64_t visits_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t step_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_COMPUTE_TIMED_STAGE_COMPUTE_H_
