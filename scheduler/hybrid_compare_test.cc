#include "scheduler/hybrid_compare.h"

#include <algorithm>

#include "gtest/gtest.h"
#include "scheduler/scenario.h"

namespace skipswarm::scheduler {
namespace {

const HybridRow* Find(const std::vector<HybridRow>& rows, const std::string& label) {
  for (const HybridRow& r : rows) {
    if (r.label == label) return &r;
  }
  return nullptr;
}

// The acceptance on SkipPipe's 12-region file (README "Hybrid scheduling"):
// 64 MiB per hop (link bandwidth = 64 MiB / the file's hop time), H = 32,
// every second node holding one stage only. The mixed plan is never worse
// than the better pure plan, for both maskings.
TEST(HybridCompareTest, MixedIsNoWorseThanEitherPurePlanOnTheReferenceFile) {
  absl::StatusOr<Scenario> sc = LoadScenarioFile("scheduler/testdata/skippipe_gcp20_schedule.json");
  ASSERT_TRUE(sc.ok()) << sc.status();
  HybridInputs in;
  in.bytes_per_mb = 64 << 20;
  in.averaging.outer_every = 32;
  in.half_one_stage = true;
  in.memory_gib = 80;
  absl::StatusOr<HybridSwarm> swarm = SwarmFromScenario(*sc, in);
  ASSERT_TRUE(swarm.ok()) << swarm.status();
  const std::vector<HybridRow> rows = CompareHybrid(*swarm, {});
  ASSERT_EQ(rows.size(), 5u);
  for (const HybridRow& r : rows) ASSERT_TRUE(r.status.ok()) << r.label << ": " << r.status;
  const HybridPlan& pipe = Find(rows, "pipeline-only")->plan;
  EXPECT_EQ(pipe.pipeline_mbs, 30);
  EXPECT_GT(pipe.activation_bytes, 0);
  for (const std::string masking : {"forward", "backward"}) {
    const HybridPlan& sdp = Find(rows, "sdp-only " + masking)->plan;
    const HybridPlan& mixed = Find(rows, "mixed " + masking)->plan;
    // Half the nodes cannot hold a subnetwork.
    EXPECT_EQ(std::count(sdp.roles.begin(), sdp.roles.end(), NodeRole::kSdp), 10) << masking;
    EXPECT_EQ(sdp.activation_bytes, 0);
    EXPECT_GE(mixed.tokens_per_s, std::max(pipe.tokens_per_s, sdp.tokens_per_s)) << masking;
  }
  const std::string table = FormatHybridTable(*swarm, in, rows);
  EXPECT_NE(table.find("mixed backward: pipeline: "), std::string::npos) << table;
}

TEST(HybridCompareTest, UplinksMustMatchTheNodes) {
  absl::StatusOr<Scenario> sc = LoadScenarioFile("scheduler/testdata/skippipe_gcp20_schedule.json");
  ASSERT_TRUE(sc.ok());
  HybridInputs in;
  in.uplinks = {1e6, 2e6};
  EXPECT_EQ(SwarmFromScenario(*sc, in).status().code(), absl::StatusCode::kInvalidArgument);
  in.uplinks.assign(20, 1e6);
  absl::StatusOr<HybridSwarm> swarm = SwarmFromScenario(*sc, in);
  ASSERT_TRUE(swarm.ok());
  EXPECT_EQ(swarm->nodes[7].uplink_bytes_per_s, 1e6);
  // No bytes per hop in a SkipPipe file: links are unlimited for averaging.
  EXPECT_EQ(swarm->link_bytes_per_s[1], 0);
  in.params = 0;
  EXPECT_EQ(SwarmFromScenario(*sc, in).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(HybridCompareTest, NamedNodesHoldOneStageAndUnknownNamesAreRefused) {
  absl::StatusOr<Scenario> sc = LoadScenarioFile("scheduler/testdata/skippipe_gcp20_schedule.json");
  ASSERT_TRUE(sc.ok());
  HybridInputs in;
  in.one_stage_nodes = {"n3", "n10"};
  absl::StatusOr<HybridSwarm> swarm = SwarmFromScenario(*sc, in);
  ASSERT_TRUE(swarm.ok()) << swarm.status();
  for (int v = 0; v < 20; ++v) {
    EXPECT_EQ(swarm->nodes[v].max_stages, v == 3 || v == 10 ? 1 : 0) << v;
  }
  in.one_stage_nodes = {"n3", "nobody"};
  absl::StatusOr<HybridSwarm> bad = SwarmFromScenario(*sc, in);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("nobody"), std::string::npos);
}

TEST(HybridCompareTest, ASelectionKeepsTheRowsOfOneMode) {
  EXPECT_EQ(*ParseHybridSelection("all"), HybridSelection::kAll);
  EXPECT_EQ(*ParseHybridSelection("pipeline"), HybridSelection::kPipeline);
  EXPECT_EQ(*ParseHybridSelection("sdp"), HybridSelection::kSdp);
  EXPECT_EQ(*ParseHybridSelection("hybrid"), HybridSelection::kHybrid);
  EXPECT_EQ(*ParseHybridSelection("mixed"), HybridSelection::kHybrid);
  EXPECT_EQ(ParseHybridSelection("both").status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<Scenario> sc = LoadScenarioFile("scheduler/testdata/skippipe_gcp20_schedule.json");
  ASSERT_TRUE(sc.ok());
  absl::StatusOr<HybridSwarm> swarm = SwarmFromScenario(*sc, {});
  ASSERT_TRUE(swarm.ok());
  std::vector<HybridRow> rows = CompareHybrid(*swarm, {}, HybridSelection::kPipeline);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].label, "pipeline-only");
  rows = CompareHybrid(*swarm, {}, HybridSelection::kSdp);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].label, "sdp-only forward");
  EXPECT_EQ(rows[1].label, "sdp-only backward");
}

}  // namespace
}  // namespace skipswarm::scheduler
