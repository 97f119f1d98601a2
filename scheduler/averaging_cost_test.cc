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

// Note [Overlapped sync]: a sync under the next H iterations' compute costs
// only what exceeds them; without overlap, sync_s / H.
TEST(AveragingCostTest, OverlapHidesTheSyncUnderHIterationsOfCompute) {
  model::AveragingOptions o;
  o.outer_every = 8;
  std::vector<AveragingGroup> g = {{1, 1e6, {1e6, 1e6}}};  // 4 MB each: 4 s
  AveragingCost c = CostAveraging(g, o);
  EXPECT_NEAR(c.sync_s, 4.0, 1e-9);
  EXPECT_NEAR(SecondsPerIteration(c, o, 0.25), 0.5, 1e-9);
  o.overlap = true;
  EXPECT_NEAR(SecondsPerIteration(c, o, 0.25), (4.0 - 2.0) / 8, 1e-9);
  EXPECT_DOUBLE_EQ(SecondsPerIteration(c, o, 1.0), 0.0);
}

// The wire formats of node/train/shard_codec.h: top-k's reduced shards
// hold up to R times a part's entries; PowerSGD ships Q with every part.
TEST(AveragingCostTest, SparseAndLowRankPriceTheirEncodedShards) {
  const double n = 1e6;
  model::AvgCodecSpec topk = *model::ParseAvgCodec("topk:0.01");
  // R = 2: part 8 x 10,000 / 2, reduced shard twice that, once each way.
  EXPECT_NEAR(model::WireBytesPerReplica(topk, n, 2), 40000 + 80000, 1e-6);
  model::AvgCodecSpec psgd = *model::ParseAvgCodec("powersgd:4");
  // 1000 x 1000: a part is 4 x 4 x (500 + 1 + 1000) bytes.
  EXPECT_NEAR(model::WireBytesPerReplica(psgd, n, 2), 3 * 16 * 1501.0, 1e-6);
  model::AvgCodecSpec fp32;
  EXPECT_NEAR(model::WireBytesPerReplica(fp32, n, 4), 2.0 * 3 / 4 * 4e6, 1e-6);
}

}  // namespace
}  // namespace skipswarm::scheduler
