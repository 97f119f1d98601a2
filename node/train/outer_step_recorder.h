// OuterStepRecorder: a test compute decorator with outer steps every H = 2
// (Note [Outer steps] in node_trainer.h) that records each outer step it is
// given instead of applying it. Tests derive from it to choose the
// pseudo-gradient (TakePseudoGradient) and to count what else they check.
//
//   class Halves final : public OuterStepRecorder {
//    public:
//     using OuterStepRecorder::OuterStepRecorder;
//     absl::StatusOr<AverageContribution> TakePseudoGradient() override;
//   };
//   ... after the run: compute->outer_steps[0] == {summed[0], contributors}
//
// Ownership: owns the inner compute. Thread rule: as the inner compute's
// (TestSwarm runs everything on its SimClock's thread); outer_steps is
// read after the run.
#ifndef SKIPSWARM_NODE_TRAIN_OUTER_STEP_RECORDER_H_
#define SKIPSWARM_NODE_TRAIN_OUTER_STEP_RECORDER_H_

#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "node/compute/forwarding_stage_compute.h"
#include "node/compute/stage_compute.h"

namespace skipswarm::node {

class OuterStepRecorder : public ForwardingStageCompute {
 public:
  // Owns `inner` (not null); `overlap` sets AveragingPlan::overlap
  // (Note [Overlapped sync] in node_trainer.h).
  explicit OuterStepRecorder(std::unique_ptr<StageCompute> inner,
                             bool overlap = false)
      : ForwardingStageCompute(std::move(inner)), overlap_(overlap) {}

  AveragingPlan averaging() const override {
    AveragingPlan p;
    p.outer_every = 2;
    p.overlap = overlap_;
    return p;
  }
  // Records (summed[0], contributors), 0 for an empty sum, and steps when
  // anyone contributed; the parameters stay as they are.
  absl::StatusOr<UpdateStats> ApplyOuterStep(const std::vector<float>& summed,
                                             int contributors) override {
    outer_steps.push_back({summed.empty() ? 0.f : summed[0], contributors});
    UpdateStats u;
    u.stepped = contributors > 0;
    return u;
  }

  std::vector<std::pair<float, int>> outer_steps;  // (summed[0], contributors)

 private:
  const bool overlap_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_OUTER_STEP_RECORDER_H_
