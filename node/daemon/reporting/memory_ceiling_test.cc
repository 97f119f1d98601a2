#include "node/daemon/reporting/memory_ceiling.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/sim_clock.h"
#include "gtest/gtest.h"
#include "model/memory_estimate.h"

namespace skipswarm::node {
namespace {

// The tiny model of tools/experiments/attack_suite.sh.
model::ModelConfig Tiny() {
  model::ModelConfig m;
  m.num_stages = 3;
  m.num_layers = 3;
  m.d_model = 64;
  m.num_heads = 4;
  m.ffn_dim = 128;
  m.seq_len = 32;
  return m;
}

constexpr int64_t kMiB = int64_t{1} << 20;

// Every term, from the model's own estimates (Note [Memory ceiling]): a term
// dropped or miscounted changes the total.
TEST(MemoryCeilingTest, EveryTermOfTheTinyModelIsCounted) {
  common::SimClock clock;
  const model::ModelConfig tiny = Tiny();
  ASSERT_TRUE(tiny.Validate().ok());
  const DaemonQuotas quotas = MakeDaemonQuotas(tiny, 2, &clock);
  MemoryCeilingInputs in;
  in.model = tiny;
  in.samples_per_mb = 2;
  in.hosted_stages = 2;
  in.memory_slots = 4;
  in.max_queued_forwards = 8;
  in.quotas = &quotas;
  in.grpc_memory_quota_bytes = GrpcMemoryQuotaBytes(tiny, 2);
  const MemoryCeiling c = ComputeMemoryCeiling(in);

  model::MemoryEstimateOptions eo;
  eo.samples_per_mb = 2;
  eo.in_flight_mbs = 4;
  const model::StageMemoryEstimate stage = model::EstimateLargestStage(tiny, eo);
  const int64_t p = stage.weight_bytes;
  const int64_t f = model::MaxFramePayloadBytes(tiny, 2);
  ASSERT_GT(p, 0);
  ASSERT_GT(f, kMiB);  // 2 x the activation + 1 MiB

  EXPECT_EQ(c.baseline_bytes, kProcessBaselineBytes + kControlPlaneBytes);
  EXPECT_EQ(c.stage_bytes, 2 * stage.total_bytes);
  // (4 slots + 8 queued) now and later, and a backward per slot: 28 frames.
  EXPECT_EQ(c.frame_bytes, 2 * 28 * f);
  // The tiny stages are far below the 64 MiB early-shard floor.
  EXPECT_EQ(c.averaging_bytes, 64 * kMiB + 2 * 3 * p);
  EXPECT_EQ(c.state_bytes, 2 * 2 * (7 * p + kMiB));
  EXPECT_EQ(c.grpc_bytes, 128 * kMiB);  // the floor: 16 tiny frames are less
  // pipeline 32 F + group 4 MiB + state 4 S + manifest 4 MiB (+ 256 KiB
  // proven joiners) + gossip 16 MiB (all strangers) + 1 MiB (proven joiners).
  EXPECT_EQ(c.stranger_bytes,
            32 * f + 4 * kMiB + 4 * (7 * p + kMiB) + 4 * kMiB + kMiB / 4 + 17 * kMiB);
  EXPECT_EQ(c.relay_bytes, 0);  // no relay served
  EXPECT_EQ(c.total_bytes, c.baseline_bytes + c.stage_bytes + c.frame_bytes +
                               c.averaging_bytes + c.state_bytes + c.grpc_bytes +
                               c.stranger_bytes + c.relay_bytes);
  const std::string line = DescribeMemoryCeiling(c);
  EXPECT_TRUE(absl::StartsWith(line, "memory ceiling: ")) << line;
  EXPECT_TRUE(absl::StrContains(line, "all strangers")) << line;
  std::printf("%s\n", line.c_str());
}

TEST(MemoryCeilingTest, GrowsWithTheHostedStagesAndSlots) {
  MemoryCeilingInputs in;
  in.model = Tiny();
  in.samples_per_mb = 2;
  const int64_t one = ComputeMemoryCeiling(in).total_bytes;
  in.hosted_stages = 3;
  const int64_t three = ComputeMemoryCeiling(in).total_bytes;
  in.memory_slots = 8;
  const int64_t more_slots = ComputeMemoryCeiling(in).total_bytes;
  EXPECT_LT(one, three);
  EXPECT_LT(three, more_slots);
  // A joiner with no stage yet is counted as hosting one.
  in.hosted_stages = 0;
  in.memory_slots = 4;
  EXPECT_EQ(ComputeMemoryCeiling(in).total_bytes, one);
}

TEST(MemoryCeilingTest, AMembersOnlySwarmHasNoSharedStrangerBudgets) {
  common::SimClock clock;
  const DaemonQuotas open = MakeDaemonQuotas(Tiny(), 2, &clock, /*members_only=*/false);
  const DaemonQuotas closed = MakeDaemonQuotas(Tiny(), 2, &clock, /*members_only=*/true);
  MemoryCeilingInputs in;
  in.model = Tiny();
  in.samples_per_mb = 2;
  in.quotas = &open;
  const int64_t open_strangers = ComputeMemoryCeiling(in).stranger_bytes;
  in.quotas = &closed;
  const int64_t closed_strangers = ComputeMemoryCeiling(in).stranger_bytes;
  // Strangers are refused outright there; the manifest (the join
  // handshake, with its invited joiners' 256 KiB) and gossip stay open to
  // them.
  EXPECT_EQ(closed_strangers, 4 * kMiB + kMiB / 4 + kGossipStrangersBurstBytes);
  EXPECT_GT(open_strangers, closed_strangers);
}

// Note [Relay memory]: a relay's circuit handlers (at most 2 x slots x
// circuits per node, and at most the server's threads) each hold a message
// and its copy being written plus an opening; each circuit and attachment
// its state.
TEST(MemoryCeilingTest, TheRelayTermIsItsStatedBoundAndZeroWithoutARelay) {
  MemoryCeilingInputs in;
  in.model = Tiny();
  in.samples_per_mb = 2;
  in.grpc_max_threads = kDaemonGrpcMaxThreads;
  const MemoryCeiling none = ComputeMemoryCeiling(in);
  EXPECT_EQ(none.relay_bytes, 0);

  const int64_t per_handler = 2 * ((256 << 10) + 1024) + 1024;
  // The daemon's defaults: 16 slots x 64 circuits, 2,048 handlers, held
  // to the 512 threads.
  in.relay_slots = 16;
  const MemoryCeiling relay = ComputeMemoryCeiling(in);
  EXPECT_EQ(relay.relay_bytes, 512 * per_handler + 512 * 1024 + 16 * 2048);
  EXPECT_EQ(relay.total_bytes, none.total_bytes + relay.relay_bytes);
  EXPECT_TRUE(absl::StrContains(DescribeMemoryCeiling(relay), " + relay 259 MiB;"))
      << DescribeMemoryCeiling(relay);
  // Few slots: the circuits bound it, not the threads.
  in.relay_slots = 2;
  in.relay_circuits_per_node = 8;
  EXPECT_EQ(ComputeMemoryCeiling(in).relay_bytes, 32 * per_handler + 16 * 1024 + 2 * 2048);
  // No thread limit: the circuits alone.
  in.relay_slots = 16;
  in.relay_circuits_per_node = 64;
  in.grpc_max_threads = 0;
  EXPECT_EQ(ComputeMemoryCeiling(in).relay_bytes,
            2048 * per_handler + 1024 * 1024 + 16 * 2048);
}

// What a daemon states at start: the computed total on /metrics.
TEST(MemoryCeilingTest, AnnouncedAsTheGaugeADaemonExports) {
  common::SimClock clock;
  const DaemonQuotas quotas = MakeDaemonQuotas(Tiny(), 2, &clock);
  MemoryCeilingInputs in;
  in.model = Tiny();
  in.samples_per_mb = 2;
  in.quotas = &quotas;
  in.grpc_memory_quota_bytes = GrpcMemoryQuotaBytes(Tiny(), 2);
  Metrics metrics;
  AnnounceMemoryCeiling("n", in, &metrics);
  EXPECT_TRUE(absl::StrContains(
      metrics.Render(), absl::StrCat("skipswarm_memory_ceiling_bytes ",
                                     ComputeMemoryCeiling(in).total_bytes)))
      << metrics.Render();
}

}  // namespace
}  // namespace skipswarm::node
