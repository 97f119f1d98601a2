#include "launcher/local_report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

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

// Note [No loss is not a loss].
TEST(FormatProgressLineTest, AnIterationWithoutAFinishedMicroBatchShowsNoLossNotNan) {
  std::map<int64_t, ProgressPoint> points = {{88, Trained(3.0)}, {89, CutShort()}};
  const std::string line = FormatProgressLine(89, 5000, points, 10.0, 1);
  EXPECT_NE(line.find("it 90/5000"), std::string::npos) << line;
  EXPECT_NE(line.find("loss -- "), std::string::npos) << line;
  EXPECT_EQ(line.find("nan"), std::string::npos) << line;
  EXPECT_NE(line.find("dropped 8"), std::string::npos) << line;
  points.erase(89);
  EXPECT_NE(FormatProgressLine(88, 5000, points, 10.0, 1).find("loss 3.0000 "), std::string::npos);
}

TEST(FormatProgressLineTest, FinishedMicroBatchesWithoutAFiniteLossSayNonFinite) {
  ProgressPoint nan = Trained(3.8);
  nan.loss_sum = 0;
  nan.n = 0;
  const std::map<int64_t, ProgressPoint> points = {{0, nan}};
  EXPECT_NE(FormatProgressLine(0, 10, points, 1.0, 0).find("loss non-finite "), std::string::npos);
}

TEST(CheckTrainedTest, TheVerdictSaysWhetherTheLastIterationFinishedNothingOrDiverged) {
  std::map<int64_t, ProgressPoint> points = {{9, Trained(3.8)}, {10, CutShort()}};
  const absl::Status cut = CheckTrained(points, 11, /*interrupted=*/false);
  EXPECT_NE(cut.message().find("none of its micro-batches finished"), std::string::npos) << cut;
  points[10] = Trained(3.8);
  points[10].n = 0;
  const absl::Status nan = CheckTrained(points, 11, /*interrupted=*/false);
  EXPECT_NE(nan.message().find("non-finite loss"), std::string::npos) << nan;
}

}  // namespace
}  // namespace skipswarm::launcher
