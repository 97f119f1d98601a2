// StageCompute: the node's compute seam (docs/DESIGN.md §3 "Compute"). The stage
// server and the data-node driver run every forward, tail and backward of a
// micro-batch through this interface and never touch libtorch, so the same
// node code runs with real maths (TorchStageCompute, torch_stage_compute.h)
// or with modelled time only (TimedStageCompute, timed_stage_compute.h; the
// simulator's choice).
//
// Tensors cross the seam in wire form (WireTensor: proto TensorMeta + bytes),
// exactly as a frame carries them, so an implementation decodes and checks
// untrusted input itself and the node copies no tensor.
//
//   // at the origin (stage 0)                 // at a relay hosting stage s
//   compute0->Start(mb, batch, done(x));        compute->Forward(mb, x, done(y));
//   compute0->Tail(mb, x_last, done(loss, g));  compute->Backward(mb, gy, done(gx));
//   compute0->Backward(mb, g, done(empty));     // ends the MB at the origin
//
// Iteration end (after every MB of the iteration finished or was dropped):
//   GradientSum sum = compute->TakeGradients();          // visit-summed grads
//   ... replicas add their sums and their visits (fixed replica order) ...
//   compute->ApplyUpdate(total.flat, total.visits);      // /visits, clip, AdamW
//   uint64_t digest = compute->ParamsDigest();           // equal on replicas
// or, for a stage with no other replica, compute->ApplyLocalUpdate().
//
// Gradients accumulate as a sum over the MBs this replica processed (each
// MB's loss is its token mean, unscaled); visits() counts completed
// backwards. Dividing the replicas' summed gradients by their summed visits
// is the visit-weighted average of docs/DESIGN.md §6 (Note [Visit weighting] in
// model/optimizer.h); clipping is per stage, as in the reference trainer.
//
// Two interfaces: StageTasks (Start, Forward, Tail, Backward, Discard;
// what the stage server calls) and StageState (gradients, the step,
// digests, checkpoints, state export/import; what the trainer calls at the
// iteration end). StageCompute is both; ForwardingStageCompute
// (forwarding_stage_compute.h) is the base of its decorators.
//
// Thread rule: implementations are thread-safe, but the node issues one
// micro-batch task at a time per StageCompute. `done` is never run inside the
// call that was given it; it runs on the implementation's runner thread or
// clock timer, with no lock of the implementation held. The synchronous
// iteration-end methods must not overlap a running task.
#ifndef SKIPSWARM_NODE_COMPUTE_STAGE_COMPUTE_H_
#define SKIPSWARM_NODE_COMPUTE_STAGE_COMPUTE_H_

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"
#include "model/averaging_options.h"
#include "model/output_sketch.h"
#include "proto/common.pb.h"

namespace skipswarm::node {

// A tensor as it travels: what FrameHeader.tensor and Frame.payload carry.
struct WireTensor {
  proto::TensorMeta meta;
  absl::Cord payload;
};

// Token ids of one micro-batch, row-major [samples, seq].
struct MicroBatchData {
  int64_t samples = 0;
  int64_t seq = 0;
  std::vector<int64_t> tokens;
  std::vector<int64_t> targets;  // next-token targets, same shape
};

struct UpdateStats {
  bool stepped = false;   // false when total visits were 0
  double grad_norm = 0;   // of the averaged gradient, before clipping
  double lr = 0;
  // ApplyLocalUpdate only: this replica's visits (what the gradient was
  // divided by), and whether the gradient was not finite, so nothing
  // stepped (Note [Non-finite steps] in node/train/node_trainer.h).
  int64_t visits = 0;
  bool nonfinite = false;
};

struct TailOutput {
  double loss = 0;   // mean token cross-entropy of the MB
  WireTensor grad;   // gradient of the loss w.r.t. the route's last activation
};

// How this stage's replicas average (Note [Outer steps] in
// node/train/node_trainer.h): outer_every = H; lossy = the averaged vector
// goes through a lossy codec (--avg_codec other than fp32).
struct AveragingPlan {
  int64_t outer_every = 1;
  bool lossy = false;
  bool overlap = false;  // Note [Overlapped sync] in node/train/node_trainer.h
  // Note [Late members] in node/train/sharded_reduce.h (model::
  // AveragingOptions::sync_deadline_*); factor 0: no deadline.
  double deadline_factor = 0;
  double deadline_min_s = 0;
  // Note [Thinned uploads] in model/avg_codec.h (model::AveragingOptions::
  // upload_floor): the smallest fraction SetUploadFraction takes effect
  // with; 1: never thinned. contribution_bytes: the codec's size of a whole
  // contribution (what the trainer budgets against).
  double upload_floor = 1;
  int64_t contribution_bytes = 0;
};

// What a replica adds to a stage average: the vector as its peers decode
// it, the payload bytes that takes with the codec, and the digest the
// replicas compare (Note [Digest re-sync]).
struct AverageContribution {
  std::vector<float> flat;
  int64_t bytes = 0;
  uint64_t digest = 0;
  // --avg_codec=powersgd: the factors `flat` is (the wire sends them,
  // Note [Encoded shards] in node/train/shard_codec.h); null otherwise.
  std::shared_ptr<const model::LowRankFactors> factors;
  // TakePseudoGradient only (Note [Idle outer contributions] in
  // node/train/node_trainer.h): the parameters did not move since the
  // anchor (no inner step had visits: a paused volunteer, a replica no
  // micro-batch reached). `flat` is then zeros and the codec was not run.
  bool idle = false;
};

// One replica's gradient for one iteration: the sum over its MBs.
struct GradientSum {
  std::vector<float> flat;  // parameters in a fixed order; size == num_params
  int64_t visits = 0;       // MBs whose backward completed here
};

using TensorDone = absl::AnyInvocable<void(absl::StatusOr<WireTensor> out)>;
using TailDone = absl::AnyInvocable<void(absl::StatusOr<TailOutput> out)>;
using SketchDone = absl::AnyInvocable<void(absl::StatusOr<model::OutputSketch> out)>;

// The compute task interface: the micro-batch work the stage server runs,
// one task at a time.
class StageTasks {
 public:
  virtual ~StageTasks() = default;

  virtual int stage() const = 0;

  // Stage 0: embeds `data` and runs stage 0's blocks; keeps the targets for
  // Tail. `mb` must be unique among this compute's pending MBs
  // (ALREADY_EXISTS otherwise).
  virtual void Start(uint64_t mb, MicroBatchData data, TensorDone done) = 0;
  // Stage > 0: this stage's blocks on the activation.
  virtual void Forward(uint64_t mb, WireTensor input, TensorDone done) = 0;
  // Stage 0: loss of a started MB and the gradient of its last activation.
  // NOT_FOUND if `mb` was not started here.
  virtual void Tail(uint64_t mb, WireTensor activation, TailDone done) = 0;
  // Backward of an earlier Start/Forward of `mb`; ends its pending state and
  // counts a visit. Returns the input gradient (an empty WireTensor after
  // Start). NOT_FOUND if `mb` is not pending.
  virtual void Backward(uint64_t mb, WireTensor grad_output, TensorDone done) = 0;
  // Verified compute (Note [Verify-only forward] in
  // node/compute/torch_stage_compute.cc): the sketch (model/output_sketch.h,
  // kDefaultSketchProjections) under `seed` of what Forward(input) would
  // return, before any codec, without advancing training: no pending MB, no
  // visit, no gradient, the weights untouched. Stage > 0 only
  // (FAILED_PRECONDITION on stage 0).
  virtual void SketchForward(WireTensor input, uint64_t seed, SketchDone done) = 0;
  // The same for the input gradient that Forward(input) then
  // Backward(grad_output) would return.
  virtual void SketchBackward(WireTensor input, WireTensor grad_output, uint64_t seed,
                              SketchDone done) = 0;
  // Drops a pending MB (lost downstream). Returns whether it was pending.
  virtual bool Discard(uint64_t mb) = 0;
  virtual size_t pending() const = 0;
};

// The state interface: the stage's weights, gradients and optimiser state
// at iteration boundaries (averaging, the step, digests, checkpoints and
// replica re-sync). REQUIRES for every method: no task running.
class StageState {
 public:
  virtual ~StageState() = default;

  // Number of float parameters (length of GradientSum::flat).
  virtual int64_t num_params() const = 0;

  // Iteration end. TakeGradients returns the accumulated sum and visits and
  // leaves them in place. ApplyUpdate sets the gradient to `summed` (the
  // replicas' sums added, length num_params()), divides it by
  // `total_visits`, clips it and takes optimiser step number step(); then
  // zeroes gradients and visits. With total_visits == 0 nothing steps but
  // step() still advances, so replicas keep counting iterations alike.
  virtual absl::StatusOr<GradientSum> TakeGradients() = 0;
  virtual absl::StatusOr<UpdateStats> ApplyUpdate(const std::vector<float>& summed,
                                                  int64_t total_visits) = 0;
  // Note [Group of one] (node/train/node_trainer.cc): the update of a
  // stage with no other replica, which has nothing to average. The same
  // step as ApplyUpdate(TakeGradients()->flat, visits) (the same bytes),
  // except that a gradient that is not finite steps nothing and answers
  // `nonfinite` (the group's rule for a sum that is not finite) instead of
  // an error. An implementation that keeps its gradients on a device steps
  // them there, with no host copy. This default takes the host path.
  virtual absl::StatusOr<UpdateStats> ApplyLocalUpdate() {
    absl::StatusOr<GradientSum> sum = TakeGradients();
    if (!sum.ok()) return sum.status();
    for (float x : sum->flat) {
      if (std::isfinite(x)) continue;
      absl::StatusOr<UpdateStats> none = ApplyUpdate(std::vector<float>(sum->flat.size(), 0.f), 0);
      if (!none.ok()) return none.status();
      none->visits = sum->visits;
      none->nonfinite = true;
      return none;
    }
    absl::StatusOr<UpdateStats> u = ApplyUpdate(sum->flat, sum->visits);
    if (u.ok()) u->visits = sum->visits;
    return u;
  }
  // Zeroes gradients and visits without a step (an iteration without data).
  virtual void ZeroGrad() = 0;
  // Digest of the parameters (and optimiser step): replicas must agree.
  virtual uint64_t ParamsDigest() = 0;
  // Iterations applied so far (the next ApplyUpdate's step number).
  virtual int64_t step() const = 0;

  // Checkpoints (weights, optimiser state, step) atomically to `path` /
  // restores from it, returning the restored step.
  virtual absl::Status SaveCheckpoint(const std::string& path) = 0;
  virtual absl::StatusOr<int64_t> LoadCheckpoint(const std::string& path) = 0;

  // The same state as bytes in memory, and its restore (returns the
  // restored step): replica re-sync (Note [Digest re-sync] in
  // node/train/node_trainer.h). An implementation without a state to move
  // answers UNIMPLEMENTED.
  virtual absl::StatusOr<std::string> ExportState() {
    return absl::UnimplementedError("this StageCompute cannot export its state");
  }
  virtual absl::StatusOr<int64_t> ImportState(absl::string_view bytes) {
    return absl::UnimplementedError("this StageCompute cannot import a state");
  }

  // Note [Outer steps] in node/train/node_trainer.h. The default is today's
  // per-iteration fp32 gradient average, which needs none of the methods
  // below. REQUIRES (all three): no task running.
  virtual AveragingPlan averaging() const { return {}; }
  // outer_every == 1, lossy codec: `flat` (this replica's gradient sum)
  // through the codec, with error feedback where the codec has it; digest =
  // ParamsDigest().
  virtual absl::StatusOr<AverageContribution> CompressGradients(std::vector<float> flat) {
    return absl::UnimplementedError("this StageCompute has no averaging codec");
  }
  // outer_every > 1, at a sync: the pseudo-gradient since the last sync
  // (anchor - parameters) through the codec; digest = the anchor's; idle
  // when the parameters equal the anchor.
  virtual absl::StatusOr<AverageContribution> TakePseudoGradient() {
    return absl::UnimplementedError("this StageCompute has no outer optimiser");
  }
  // Note [Thinned uploads] (model/avg_codec.h): the share of its blocks the
  // next TakePseudoGradient sends (one call only; then 1 again). A compute
  // without the codec ignores it.
  virtual void SetUploadFraction(double fraction) {}
  // The outer step with the replicas' summed pseudo-gradients over
  // `contributors` (the replicas that were not idle): parameters become
  // the new anchor (with overlap: the new
  // anchor plus what this replica moved since its TakePseudoGradient, Note
  // [Overlapped sync]). contributors == 0 or a
  // non-finite sum: parameters go back to the anchor (no outer step).
  virtual absl::StatusOr<UpdateStats> ApplyOuterStep(const std::vector<float>& summed,
                                                     int contributors) {
    return absl::UnimplementedError("this StageCompute has no outer optimiser");
  }
};

// One hosted stage: its tasks and its state, on one object (the stage
// server runs the tasks, the trainer reads and updates the state between
// iterations).
class StageCompute : public StageTasks, public StageState {};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_COMPUTE_STAGE_COMPUTE_H_
