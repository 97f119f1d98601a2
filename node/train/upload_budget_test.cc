#include "node/train/upload_budget.h"

#include <gtest/gtest.h>

#include <cmath>

namespace skipswarm::node {
namespace {

// node/train/README.md's slow member: stage 2's 51,000 int8 bytes, one of
// two replicas at 0.4 Mbit/s (50,000 B/s), the other at 2 (250,000 B/s).
UploadBudgetInputs Slow() {
  UploadBudgetInputs in;
  in.own = 50'000;
  in.figures = {50'000, 250'000};
  in.bytes = 51'000;
  in.floor = 0.25;
  return in;
}

TEST(UploadFractionTest, AnEvenGroupSendsEverything) {
  UploadBudgetInputs in = Slow();
  in.own = 250'000;
  in.figures = {250'000, 250'000};
  EXPECT_EQ(UploadFraction(in), 1);
  in.window = absl::Seconds(0.72);
  EXPECT_EQ(UploadFraction(in), 1);
  // The fast member of an uneven group too.
  in.figures = {50'000, 250'000};
  EXPECT_EQ(UploadFraction(in), 1);
  // Two figures of one cap, measured a few percent apart: nobody thins
  // (before the slack the slower one sent 0.94 of its blocks).
  in.window = absl::ZeroDuration();
  in.own = 235'000;
  in.figures = {235'000, 250'000};
  EXPECT_EQ(UploadFraction(in), 1);
  // Beyond the slack it does.
  in.own = 150'000;
  in.figures = {150'000, 250'000};
  EXPECT_LT(UploadFraction(in), 1);
}

// Overlapped: the slow member's 1.02 s must fit 0.8 of 0.72 s of H steps;
// it owns a sixth (the sized cut), sent whole, so its parts shrink to
// (0.576 x 50,000 - 8,500) / 42,500 = 0.478.
TEST(UploadFractionTest, ASlowMemberThinsItsPartsToFitTheHSteps) {
  UploadBudgetInputs in = Slow();
  in.window = absl::Seconds(0.72);
  const double keep = UploadFraction(in);
  EXPECT_NEAR(keep, (0.576 * 50'000 - 8'500) / 42'500.0, 1e-9);
  const double upload_s = (keep * 42'500 + 8'500) / 50'000;
  EXPECT_NEAR(upload_s, 0.8 * 0.72, 1e-9);
  // A window that covers the whole upload: everything.
  in.window = absl::Seconds(1.5);
  EXPECT_EQ(UploadFraction(in), 1);
}

// Waited for, the budget is 1.25 x the median member's upload (0.204 s):
// 0.1 of the parts, raised to the floor.
TEST(UploadFractionTest, WaitedForItMatchesItsPeersDownToTheFloor) {
  UploadBudgetInputs in = Slow();
  EXPECT_EQ(UploadFraction(in), 0.25);
  in.floor = 0.01;
  EXPECT_NEAR(UploadFraction(in), (1.25 * 0.204 * 50'000 - 8'500) / 42'500.0, 1e-9);
}

TEST(UploadFractionTest, UnknownFiguresOrNoFloorSendEverything) {
  UploadBudgetInputs in = Slow();
  in.floor = 1;
  EXPECT_EQ(UploadFraction(in), 1);
  in = Slow();
  in.floor = std::nan("");
  EXPECT_EQ(UploadFraction(in), 1);
  in = Slow();
  in.own = 0;
  EXPECT_EQ(UploadFraction(in), 1);
  in = Slow();
  in.figures = {0, 250'000};
  EXPECT_EQ(UploadFraction(in), 1);
  in = Slow();
  in.figures = {50'000};  // a group of one
  EXPECT_EQ(UploadFraction(in), 1);
  in = Slow();
  in.bytes = 0;
  EXPECT_EQ(UploadFraction(in), 1);
  in = Slow();
  in.floor = -1;  // clamped to a thousandth, never 0 or below
  EXPECT_GT(UploadFraction(in), 0);
}

}  // namespace
}  // namespace skipswarm::node
