#include "launcher/local_report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

namespace skipswarm::launcher {
namespace {

ProgressPoint Trained(double loss) {
  ProgressPoint p;
  p.loss_sum = 2 * loss;
  p.n = 2;
  p.completed = 8;
  return p;
}

// Every micro-batch of the iteration dropped (a stop cut it short).
ProgressPoint CutShort() {
  ProgressPoint p;
  p.dropped = 8;
  return p;
}

TEST(CheckTrainedTest, AStopThatCutTheLastIterationShortIsNoFailure) {
  std::map<int64_t, ProgressPoint> points = {{9, Trained(3.8)}, {10, CutShort()}};
  EXPECT_TRUE(CheckTrained(points, 1000, /*interrupted=*/true).ok());
  // Without the stop the same log is a run that did not train.
  EXPECT_TRUE(absl::IsDataLoss(CheckTrained(points, 11, /*interrupted=*/false)));
}

TEST(CheckTrainedTest, ANonFiniteLossOfFinishedMicroBatchesFailsEvenWhenInterrupted) {
  ProgressPoint nan = Trained(3.8);
  nan.loss_sum = 0;
  nan.n = 0;  // the data nodes' NaN is left out of the mean; their micro-batches finished
  std::map<int64_t, ProgressPoint> points = {{9, Trained(3.8)}, {10, nan}};
  EXPECT_TRUE(absl::IsDataLoss(CheckTrained(points, 1000, /*interrupted=*/true)));
  // A cut-short iteration after a NaN one does not hide it.
  points[11] = CutShort();
  EXPECT_TRUE(absl::IsDataLoss(CheckTrained(points, 1000, /*interrupted=*/true)));
}

TEST(CheckTrainedTest, OnlyOneIterationCutShortIsNotEnough) {
  std::map<int64_t, ProgressPoint> points = {{0, CutShort()}};
  EXPECT_TRUE(absl::IsDataLoss(CheckTrained(points, 1000, /*interrupted=*/true)));
}

}  // namespace
}  // namespace skipswarm::launcher
