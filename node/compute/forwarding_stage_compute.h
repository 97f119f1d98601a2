// ForwardingStageCompute: the base of every StageCompute decorator (the
// gossip daemon's FirstWorkProbe, the simulator's WorldCompute, test
// wrappers). Every method of both interfaces forwards to the inner compute;
// a decorator overrides only what it changes and reaches the inner compute
// through inner().
//
//   class SlowStart final : public ForwardingStageCompute {
//    public:
//     using ForwardingStageCompute::ForwardingStageCompute;
//     void Start(uint64_t mb, MicroBatchData data, TensorDone done) override {
//       inner()->Start(mb, std::move(data), Delayed(std::move(done)));
//     }
//   };
//
// Ownership: owns the inner compute, or borrows it (it must then outlive
// the decorator). Thread rule: as the inner compute's; no state of its own.
#ifndef SKIPSWARM_NODE_COMPUTE_FORWARDING_STAGE_COMPUTE_H_
#define SKIPSWARM_NODE_COMPUTE_FORWARDING_STAGE_COMPUTE_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "node/compute/stage_compute.h"

namespace skipswarm::node {

class ForwardingStageCompute : public StageCompute {
 public:
  // Owns `inner` (not null).
  explicit ForwardingStageCompute(std::unique_ptr<StageCompute> inner)
      : owned_(std::move(inner)), inner_(owned_.get()) {}
  // Borrows `inner` (not null; must outlive this).
  explicit ForwardingStageCompute(StageCompute* inner) : inner_(inner) {}

  // StageTasks.
  int stage() const override { return inner_->stage(); }
  void Start(uint64_t mb, MicroBatchData data, TensorDone done) override {
    inner_->Start(mb, std::move(data), std::move(done));
  }
  void Forward(uint64_t mb, WireTensor input, TensorDone done) override {
    inner_->Forward(mb, std::move(input), std::move(done));
  }
  void Tail(uint64_t mb, WireTensor activation, TailDone done) override {
    inner_->Tail(mb, std::move(activation), std::move(done));
  }
  void Backward(uint64_t mb, WireTensor grad_output, TensorDone done) override {
    inner_->Backward(mb, std::move(grad_output), std::move(done));
  }
  void SketchForward(WireTensor input, uint64_t seed, SketchDone done) override {
    inner_->SketchForward(std::move(input), seed, std::move(done));
  }
  void SketchBackward(WireTensor input, WireTensor grad_output, uint64_t seed,
                      SketchDone done) override {
    inner_->SketchBackward(std::move(input), std::move(grad_output), seed, std::move(done));
  }
  bool Discard(uint64_t mb) override { return inner_->Discard(mb); }
  size_t pending() const override { return inner_->pending(); }

  // StageState.
  int64_t num_params() const override { return inner_->num_params(); }
  absl::StatusOr<GradientSum> TakeGradients() override { return inner_->TakeGradients(); }
  absl::StatusOr<UpdateStats> ApplyUpdate(const std::vector<float>& summed,
                                          int64_t total_visits) override {
    return inner_->ApplyUpdate(summed, total_visits);
  }
  // A decorator that changes TakeGradients or ApplyUpdate overrides this
  // too (StageState::ApplyLocalUpdate() is the path through them), or the
  // update of a group of one bypasses its change.
  absl::StatusOr<UpdateStats> ApplyLocalUpdate() override { return inner_->ApplyLocalUpdate(); }
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
  // Note [Outer steps] (node/train/node_trainer.h): forwarded too, or a
  // decorated compute would fall back to the interface's defaults.
  AveragingPlan averaging() const override { return inner_->averaging(); }
  absl::StatusOr<AverageContribution> CompressGradients(std::vector<float> flat) override {
    return inner_->CompressGradients(std::move(flat));
  }
  absl::StatusOr<AverageContribution> TakePseudoGradient() override {
    return inner_->TakePseudoGradient();
  }
  void SetUploadFraction(double fraction) override { inner_->SetUploadFraction(fraction); }
  absl::StatusOr<UpdateStats> ApplyOuterStep(const std::vector<float>& summed,
                                             int contributors) override {
    return inner_->ApplyOuterStep(summed, contributors);
  }

 protected:
  StageCompute* inner() const { return inner_; }

 private:
  const std::unique_ptr<StageCompute> owned_;  // null when borrowed
  StageCompute* const inner_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_COMPUTE_FORWARDING_STAGE_COMPUTE_H_
