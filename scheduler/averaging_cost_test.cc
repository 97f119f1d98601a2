#include "scheduler/averaging_cost.h"

#include <gtest/gtest.h>

namespace skipswarm::scheduler {
namespace {

// The arithmetic: a 44 M-parameter stage, fp32, a 2.5 MB/s uplink.
TEST(AveragingCostTest, HomeUplinkFp32EveryIteration) {
  model::AveragingOptions o;
  std::vector<AveragingGroup> g = {{1, 44e6, {2.5e6, 2.5e6}}};
  AveragingCost c = CostAveraging(g, o);
  // 2 replicas: each uploads 2 x 1/2 x 176 MB = 176 MB -> 70.4 s.
  EXPECT_DOUBLE_EQ(c.bytes_per_sync, 2 * 176e6);
  EXPECT_NEAR(c.sync_s, 70.4, 1e-9);
  EXPECT_NEAR(c.seconds_per_iteration, 70.4, 1e-9);
  EXPECT_EQ(c.slowest_stage, 1);
}

TEST(AveragingCostTest, CodecAndHDivideTheCostAndTheSlowestMemberSetsThePace) {
  model::AveragingOptions o;
  o.outer_every = 32;
  o.codec = *model::ParseAvgCodec("int8");
  std::vector<AveragingGroup> g = {{1, 1e6, {10e6, 1e6, 5e6}}, {2, 1e6, {0, 0}}, {3, 5e6, {}}};
  AveragingCost c = CostAveraging(g, o);
  const double b = 1e6 + 4 * 3907;  // int8 blockwise of 1e6 floats
  const double per_replica = 2.0 * 2 / 3 * b;
  EXPECT_NEAR(c.sync_s, per_replica / 1e6, 1e-9);  // the 1 MB/s member
  EXPECT_EQ(c.slowest_stage, 1);
  EXPECT_NEAR(c.seconds_per_iteration, c.sync_s / 32, 1e-12);
  // Stage 2's unlimited links cost bytes but no time; stage 3 has 0 replicas.
  EXPECT_NEAR(c.bytes_per_sync, 3 * per_replica + 2 * (2.0 * 1 / 2 * b), 1e-6);
  EXPECT_NEAR(c.bytes_per_iteration, c.bytes_per_sync / 32, 1e-9);
}

}  // namespace
}  // namespace skipswarm::scheduler
