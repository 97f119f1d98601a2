#include "model/sdp_assignment.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include "model/route.h"

namespace skipswarm::model {
namespace {

using ::testing::ElementsAre;

TEST(SdpAssignmentTest, HalfOfSixStagesOverFourWorkers) {
  absl::StatusOr<SdpAssignment> a = AssignSubnetworks(6, 4, 0.5);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->stages_per_worker, 3);
  ASSERT_EQ(a->subnetworks.size(), 4u);
  EXPECT_THAT(a->subnetworks[0], ElementsAre(0, 1, 5));
  EXPECT_THAT(a->subnetworks[1], ElementsAre(0, 2, 5));
  EXPECT_THAT(a->subnetworks[2], ElementsAre(0, 3, 5));
  EXPECT_THAT(a->subnetworks[3], ElementsAre(0, 4, 5));
  EXPECT_THAT(a->coverage, ElementsAre(4, 1, 1, 1, 1, 4));
}

TEST(SdpAssignmentTest, EveryMiddleStageIsOwnedEquallyAndEndsAlways) {
  for (int stages : {3, 4, 6, 8, 12}) {
    for (double keep : {0.5, 0.75, 1.0}) {
      for (int workers = 1; workers <= 12; ++workers) {
        absl::StatusOr<SdpAssignment> a = AssignSubnetworks(stages, workers, keep);
        if (!a.ok()) {
          EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
          continue;
        }
        const int p = a->stages_per_worker;
        for (const std::vector<int>& net : a->subnetworks) {
          EXPECT_EQ(static_cast<int>(net.size()), p);
          EXPECT_EQ(net.front(), 0);
          EXPECT_EQ(net.back(), stages - 1);
          EXPECT_TRUE(ValidateRoute(net, stages).ok());  // a subnetwork is a route
        }
        EXPECT_EQ(a->coverage[0], workers);
        EXPECT_EQ(a->coverage[stages - 1], workers);
        for (int s = 1; s + 1 < stages; ++s) {
          EXPECT_EQ(a->coverage[s], a->coverage[1]) << stages << " " << keep << " " << workers;
          EXPECT_GT(a->coverage[s], 0);
        }
        EXPECT_TRUE(std::is_sorted(a->subnetworks.begin(), a->subnetworks.end()));
      }
    }
  }
}

TEST(SdpAssignmentTest, ThreeQuartersOfSixStagesOverFourWorkers) {
  absl::StatusOr<SdpAssignment> a = AssignSubnetworks(6, 4, 0.75);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->stages_per_worker, 5);  // round(4.5)
  EXPECT_THAT(a->coverage, ElementsAre(4, 3, 3, 3, 3, 4));
  EXPECT_THAT(a->subnetworks[0], ElementsAre(0, 1, 2, 3, 5));
}

TEST(SdpAssignmentTest, IsDeterministic) {
  EXPECT_EQ(AssignSubnetworks(12, 10, 0.5)->subnetworks,
            AssignSubnetworks(12, 10, 0.5)->subnetworks);
}

TEST(SdpAssignmentTest, RefusesUnbalancedAndDegenerateAssignments) {
  absl::StatusOr<SdpAssignment> a = AssignSubnetworks(6, 3, 0.5);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(a.status().message().find("multiple of 4"), std::string::npos) << a.status();
  EXPECT_FALSE(AssignSubnetworks(6, 4, 0.2).ok());   // only stages 0 and 5
  EXPECT_FALSE(AssignSubnetworks(6, 4, 0.0).ok());
  EXPECT_FALSE(AssignSubnetworks(6, 4, 1.5).ok());
  EXPECT_FALSE(AssignSubnetworks(6, 0, 0.5).ok());
}

TEST(SdpAssignmentTest, FullKeepIsDataParallelism) {
  absl::StatusOr<SdpAssignment> a = AssignSubnetworks(4, 3, 1.0);
  ASSERT_TRUE(a.ok());
  for (const auto& net : a->subnetworks) EXPECT_THAT(net, ElementsAre(0, 1, 2, 3));
}

TEST(SdpAssignmentTest, ParsesModesAndFormatsStageSets) {
  EXPECT_EQ(*ParseSdpMode("forward"), SdpMode::kForward);
  EXPECT_EQ(*ParseSdpMode("backward"), SdpMode::kBackward);
  EXPECT_EQ(*ParseSdpMode(""), SdpMode::kOff);
  EXPECT_FALSE(ParseSdpMode("sideways").ok());
  EXPECT_EQ(FormatStageSet({0, 2, 5}), "0+2+5");
  EXPECT_THAT(StagesOutside({0, 2, 5}, 6), ElementsAre(1, 3, 4));
}

}  // namespace
}  // namespace skipswarm::model
