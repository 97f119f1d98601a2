#include "scheduler/hybrid_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "scheduler/averaging_cost.h"

namespace skipswarm::scheduler {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// `per_stage[s]` nodes host stage s (data nodes first), every node 1 ms per
// layer and sample, 4 slots, every hop `hop_s`, memory and uplink as given.
HybridSwarm MakeSwarm(const std::vector<int>& per_stage, double hop_s, double params,
                      double memory_gib, double uplink) {
  HybridSwarm s;
  s.model.shape = {static_cast<int>(per_stage.size()), 2, 2, 4 << 20};
  s.model.tokens_per_sample = 128;
  s.model.params = params;
  s.model.activation_gib = 0.25;
  for (int st = 0; st < static_cast<int>(per_stage.size()); ++st) {
    for (int i = 0; i < per_stage[st]; ++i) {
      HybridNode n;
      n.spec.name = absl::StrCat("s", st, "n", i);
      n.spec.stage = st;
      n.spec.sec_per_layer_sample = 0.001;
      n.spec.memory_slots = 4;
      n.memory_gib = memory_gib;
      n.uplink_bytes_per_s = uplink;
      s.nodes.push_back(n);
    }
  }
  const size_t n = s.nodes.size();
  s.hop_s.assign(n * n, hop_s);
  s.workload.mb_per_data_node = 4;
  s.workload.path_length = 3;
  return s;
}

int Count(const HybridPlan& p, NodeRole role) {
  return static_cast<int>(std::count(p.roles.begin(), p.roles.end(), role));
}

HybridOptions Mode(HybridMode mode) {
  HybridOptions o;
  o.mode = mode;
  return o;
}

TEST(HybridPlanTest, SdpWindowsAreTheBalancedAssignment) {
  // model/sdp_assignment.h's example: 6 stages, keep 0.5 (P = 3), 4 workers.
  const std::vector<std::vector<int>> w = SdpWindows(6, 3, 4);
  const std::vector<std::vector<int>> want = {{0, 1, 5}, {0, 2, 5}, {0, 3, 5}, {0, 4, 5}};
  EXPECT_EQ(w, want);
  // 3 workers of 4 stages over 6: coverage of the middle stages differs by <= 1.
  std::vector<int> cover(6, 0);
  for (const auto& sub : SdpWindows(6, 4, 3)) {
    for (int st : sub) ++cover[st];
  }
  EXPECT_EQ(cover[0], 3);
  EXPECT_EQ(cover[5], 3);
  const auto [lo, hi] = std::minmax_element(cover.begin() + 1, cover.end() - 1);
  EXPECT_LE(*hi - *lo, 1);
}

TEST(HybridPlanTest, NobodyFitsASubnetworkMeansPurePipeline) {
  // 1e9 parameters in 4 stages: 3.7 GiB of training state per stage; 5 GiB
  // holds one stage and its slots, never three stages.
  const HybridSwarm s = MakeSwarm({2, 2, 2, 2}, 0.5, 1e9, 5, 0);
  EXPECT_EQ(SdpStages(s), 3);
  for (int v = 0; v < 8; ++v) EXPECT_FALSE(FitsSdp(s, v));
  EXPECT_EQ(PipelineSlots(s, 0), 4);
  EXPECT_EQ(AllocateHybrid(s, Mode(HybridMode::kSdpOnly)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<HybridPlan> mixed = AllocateHybrid(s, Mode(HybridMode::kMixed));
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  EXPECT_EQ(Count(*mixed, NodeRole::kPipeline), 8);
  absl::StatusOr<HybridPlan> pipe = AllocateHybrid(s, Mode(HybridMode::kPipelineOnly));
  ASSERT_TRUE(pipe.ok());
  EXPECT_DOUBLE_EQ(mixed->tokens_per_s, pipe->tokens_per_s);
  EXPECT_EQ(mixed->sdp_mbs, 0);
  EXPECT_EQ(mixed->pipeline_mbs, 8);
}

TEST(HybridPlanTest, SlowLinksAndBigMemoryChooseSdp) {
  // 10 s per activation hop, a small model (averaging is cheap), memory for
  // everything: every node trains its own subnetwork.
  const HybridSwarm s = MakeSwarm({2, 2, 2, 2}, 10, 1e6, 0, 1e7);
  absl::StatusOr<HybridPlan> mixed = AllocateHybrid(s, Mode(HybridMode::kMixed));
  absl::StatusOr<HybridPlan> pipe = AllocateHybrid(s, Mode(HybridMode::kPipelineOnly));
  ASSERT_TRUE(mixed.ok() && pipe.ok());
  EXPECT_EQ(Count(*mixed, NodeRole::kSdp), 8);
  EXPECT_GT(mixed->tokens_per_s, 10 * pipe->tokens_per_s);
  EXPECT_EQ(mixed->activation_bytes, 0);
  EXPECT_GT(pipe->activation_bytes, 0);
  // Every SDP node owns stage 0 and the last stage.
  EXPECT_EQ(mixed->stage_owners[0], 8);
  EXPECT_EQ(mixed->stage_owners[3], 8);
}

TEST(HybridPlanTest, AllFastLinksFollowTheCost) {
  // 1 ms hops, unlimited uplinks and links: averaging costs no time, so
  // the choice is compute alone. An SDP node computes its M MBs back to
  // back, a pipeline waits for hops and its slowest stage, so the cost says
  // SDP everywhere; the mix equals SDP-only exactly.
  const HybridSwarm s = MakeSwarm({2, 2, 2, 2}, 0.001, 1e8, 0, 0);
  absl::StatusOr<HybridPlan> mixed = AllocateHybrid(s, Mode(HybridMode::kMixed));
  absl::StatusOr<HybridPlan> sdp = AllocateHybrid(s, Mode(HybridMode::kSdpOnly));
  absl::StatusOr<HybridPlan> pipe = AllocateHybrid(s, Mode(HybridMode::kPipelineOnly));
  ASSERT_TRUE(mixed.ok() && sdp.ok() && pipe.ok());
  EXPECT_EQ(mixed->averaging_s, 0);
  EXPECT_GT(sdp->tokens_per_s, pipe->tokens_per_s);
  EXPECT_EQ(mixed->roles, sdp->roles);
  EXPECT_DOUBLE_EQ(mixed->tokens_per_s, sdp->tokens_per_s);
}

TEST(HybridPlanTest, TheSameSwarmGivesTheSamePlan) {
  HybridSwarm s = MakeSwarm({2, 2, 2, 2}, 0.01, 1e7, 0, 1e8);
  for (size_t v = 1; v < s.nodes.size(); v += 2) s.nodes[v].max_stages = 1;
  absl::StatusOr<HybridPlan> a = AllocateHybrid(s, Mode(HybridMode::kMixed));
  absl::StatusOr<HybridPlan> b = AllocateHybrid(s, Mode(HybridMode::kMixed));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->roles, b->roles);
  EXPECT_EQ(a->subnetwork, b->subnetwork);
  EXPECT_EQ(a->tokens_per_s, b->tokens_per_s);
  ASSERT_EQ(a->pipeline_plan.routes.size(), b->pipeline_plan.routes.size());
  for (size_t i = 0; i < a->pipeline_plan.routes.size(); ++i) {
    EXPECT_EQ(a->pipeline_plan.routes[i].nodes, b->pipeline_plan.routes[i].nodes);
  }
}

TEST(HybridPlanTest, BigModelOnSlowUplinksWithFastLinksChoosesPipeline) {
  // Fast activation hops, but 4e9 parameters over 100 MB/s uplinks: an SDP
  // node would average three stages with eight owners each, a pipeline host
  // one stage with two.
  const HybridSwarm s = MakeSwarm({2, 2, 2, 2}, 0.01, 4e9, 0, 1e8);
  absl::StatusOr<HybridPlan> mixed = AllocateHybrid(s, Mode(HybridMode::kMixed));
  absl::StatusOr<HybridPlan> sdp = AllocateHybrid(s, Mode(HybridMode::kSdpOnly));
  absl::StatusOr<HybridPlan> pipe = AllocateHybrid(s, Mode(HybridMode::kPipelineOnly));
  ASSERT_TRUE(mixed.ok() && sdp.ok() && pipe.ok());
  EXPECT_GT(pipe->tokens_per_s, sdp->tokens_per_s);
  EXPECT_EQ(Count(*mixed, NodeRole::kSdp), 0);
  EXPECT_GE(mixed->tokens_per_s, pipe->tokens_per_s);
  EXPECT_GT(sdp->averaging_sync_s, pipe->averaging_sync_s);
}

TEST(HybridPlanTest, HalfTheNodesHoldOneStageSoTheMixWins) {
  // One node of every stage can hold one stage only (0.6 GiB: 0.04 GiB of
  // state and two slots; a subnetwork needs 0.86 GiB). 100 MB/s uplinks make
  // averaging three stages cost an SDP node 0.47 s. SDP-only leaves the
  // small nodes idle; pipeline-only leaves the big nodes serving one stage;
  // the mix trains subnetworks on the big nodes and runs a pipeline through
  // the small ones within the same iteration.
  HybridSwarm s = MakeSwarm({2, 2, 2, 2}, 0.01, 1e7, 0, 1e8);
  for (size_t v = 1; v < s.nodes.size(); v += 2) s.nodes[v].memory_gib = 0.6;
  absl::StatusOr<HybridPlan> mixed = AllocateHybrid(s, Mode(HybridMode::kMixed));
  absl::StatusOr<HybridPlan> sdp = AllocateHybrid(s, Mode(HybridMode::kSdpOnly));
  absl::StatusOr<HybridPlan> pipe = AllocateHybrid(s, Mode(HybridMode::kPipelineOnly));
  ASSERT_TRUE(mixed.ok() && sdp.ok() && pipe.ok());
  EXPECT_EQ(Count(*sdp, NodeRole::kSdp), 4);
  EXPECT_GT(Count(*mixed, NodeRole::kSdp), 0);
  EXPECT_GT(Count(*mixed, NodeRole::kPipeline), 0);
  EXPECT_GT(mixed->tokens_per_s, sdp->tokens_per_s);
  EXPECT_GT(mixed->tokens_per_s, pipe->tokens_per_s);
  for (int v = 0; v < 8; ++v) {
    if (mixed->roles[v] == NodeRole::kSdp) {
      EXPECT_TRUE(FitsSdp(s, v));
    }
  }
}

TEST(HybridPlanTest, SingleStageAveragingMatchesAveragingCost) {
  // Pure pipeline with unlimited links: the per-node model reduces to
  // averaging_cost.h's per-group model.
  const HybridSwarm s = MakeSwarm({2, 3, 2}, 0.1, 3e8, 0, 5e7);
  absl::StatusOr<HybridPlan> pipe = AllocateHybrid(s, Mode(HybridMode::kPipelineOnly));
  ASSERT_TRUE(pipe.ok());
  std::vector<AveragingGroup> groups = {{0, 1e8, {5e7, 5e7}}, {1, 1e8, {5e7, 5e7, 5e7}},
                                        {2, 1e8, {5e7, 5e7}}};
  const AveragingCost c = CostAveraging(groups, s.averaging);
  EXPECT_DOUBLE_EQ(pipe->averaging_sync_s, c.sync_s);
  EXPECT_DOUBLE_EQ(pipe->averaging_bytes, c.bytes_per_iteration);
}

TEST(HybridPlanTest, BackwardMaskingCostsMoreMemoryAndCompute) {
  HybridSwarm s = MakeSwarm({1, 1, 1, 1, 1, 1}, 0.1, 6e8, 9.5, 0);
  // 6 stages of 1e8 parameters: 1.49 GiB trained, 0.37 GiB frozen per stage.
  const double fwd = SdpMicroBatchSeconds(s, 0);
  EXPECT_TRUE(FitsSdp(s, 0));  // 3 x 1.49 + 3 x 0.25 = 5.2 GiB
  s.model.backward_masking = true;
  EXPECT_GT(SdpMicroBatchSeconds(s, 0), fwd);
  s.nodes[0].memory_gib = 5.5;  // 4.47 + 1.12 + 1.5 = 7.1 GiB needed
  EXPECT_FALSE(FitsSdp(s, 0));
  EXPECT_NEAR(3 * 1e8 * 16 / kGiB, 4.47, 0.01);
}

TEST(HybridPlanTest, ANodeHoldingOneStageNeverTrainsASubnetwork) {
  HybridSwarm s = MakeSwarm({1, 1, 1, 1}, 0.1, 1e6, 0, 0);
  EXPECT_TRUE(FitsSdp(s, 1));
  s.nodes[1].max_stages = 1;
  EXPECT_FALSE(FitsSdp(s, 1));
  EXPECT_EQ(PipelineSlots(s, 1), 4);
  s.nodes[1].max_stages = 3;  // P = 3 with forward masking, S = 4 with backward
  EXPECT_TRUE(FitsSdp(s, 1));
  s.model.backward_masking = true;
  EXPECT_FALSE(FitsSdp(s, 1));
}

TEST(HybridPlanTest, RolesThatCannotTrainAreRefused) {
  const HybridSwarm s = MakeSwarm({1, 1, 1}, 0.1, 1e6, 0, 0);
  std::vector<NodeRole> roles = {NodeRole::kPipeline, NodeRole::kPipeline, NodeRole::kIdle};
  EXPECT_EQ(CostRoles(s, roles, {}).status().code(), absl::StatusCode::kFailedPrecondition);
  roles.assign(3, NodeRole::kIdle);
  EXPECT_EQ(CostRoles(s, roles, {}).status().code(), absl::StatusCode::kFailedPrecondition);
  roles.resize(2);
  EXPECT_EQ(CostRoles(s, roles, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

// The allocator's contract on constructed swarms: whatever the memory,
// uplinks, links, model size and masking, the mixed plan trains at least as
// many tokens per second as the better pure plan that can train (its
// search starts from both), and somewhere it is strictly better. Cases are
// drawn from a fixed-seed mt19937 (raw outputs, no library distributions,
// so every standard library draws the same swarms).
TEST(HybridPlanTest, MixedIsNeverWorseThanTheBetterPurePlanOnDrawnSwarms) {
  std::mt19937 gen(20261203);
  auto pick = [&gen](int k) { return static_cast<int>(gen() % static_cast<uint32_t>(k)); };
  auto unit = [&gen] { return gen() / 4294967296.0; };
  int strict_wins = 0;
  for (int c = 0; c < 12; ++c) {
    std::vector<int> per_stage(3 + pick(2));
    for (int& k : per_stage) k = 1 + pick(2);
    const double hop_s = 0.005 * std::pow(200.0, unit());          // 5 ms .. 1 s
    const double params = 1e6 * std::pow(100.0, unit());           // 1 M .. 100 M
    const double uplink = 1e6 * std::pow(1000.0, unit());          // 1 MB/s .. 1 GB/s
    HybridSwarm s = MakeSwarm(per_stage, hop_s, params, 0, uplink);
    s.model.backward_masking = pick(2) == 1;
    for (HybridNode& n : s.nodes) {
      n.spec.sec_per_layer_sample *= 0.5 + 1.5 * unit();
      if (pick(3) == 0) n.max_stages = 1;  // the heterogeneous-memory kind
      if (pick(4) == 0) n.uplink_bytes_per_s /= 20;  // a slow home uplink
    }
    const std::string what = absl::StrCat("case ", c, ": ", s.nodes.size(), " nodes, hop ", hop_s,
                                          " s, ", params, " params, uplink ", uplink);
    absl::StatusOr<HybridPlan> pipe = AllocateHybrid(s, Mode(HybridMode::kPipelineOnly));
    absl::StatusOr<HybridPlan> sdp = AllocateHybrid(s, Mode(HybridMode::kSdpOnly));
    absl::StatusOr<HybridPlan> mixed = AllocateHybrid(s, Mode(HybridMode::kMixed));
    ASSERT_TRUE(mixed.ok()) << what << ": " << mixed.status();
    const double best = std::max(pipe.ok() ? pipe->tokens_per_s : 0.0,
                                 sdp.ok() ? sdp->tokens_per_s : 0.0);
    ASSERT_GT(best, 0) << what;
    EXPECT_GE(mixed->tokens_per_s, best * (1 - 1e-9)) << what;
    if (mixed->tokens_per_s > best * 1.01) ++strict_wins;
  }
  EXPECT_GE(strict_wins, 1);
}

}  // namespace
}  // namespace skipswarm::scheduler
