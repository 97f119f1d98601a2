#include "sim/hybrid_sim.h"

#include <algorithm>

#include "gtest/gtest.h"
#include "sim/scenario.h"

namespace skipswarm::sim {
namespace {

const HybridSimRow& Row(const std::vector<HybridSimRow>& rows, const std::string& label) {
  for (const HybridSimRow& r : rows) {
    if (r.row.label == label) return r;
  }
  ADD_FAILURE() << "no row " << label;
  return rows.front();
}

int Count(const HybridSimRow& r, scheduler::NodeRole role) {
  return static_cast<int>(std::count(r.row.plan.roles.begin(), r.row.plan.roles.end(), role));
}

// home-uplink (16 home GPUs behind 10-50 Mbit/s uplinks, 350 M parameters),
// H = 32 fp32: SDP-only spends 66 s per iteration averaging all 8 stages
// from every node; the mix trains subnetworks on the fast uplinks and hosts
// the pipeline on the slow ones (README "Hybrid scheduling").
TEST(HybridSimTest, HomeUplinksMixSdpOnFastUplinksWithAPipeline) {
  absl::StatusOr<SimScenario> sc = LoadSimScenario("sim/scenarios/home-uplink.json", 1);
  ASSERT_TRUE(sc.ok()) << sc.status();
  scheduler::HybridInputs in;
  in.params = sc->averaging->model_params;
  in.averaging.outer_every = 32;
  SimOptions options;
  options.max_evaluations = 3000;
  options.stall_evaluations = 500;
  absl::StatusOr<std::vector<HybridSimRow>> rows = SimulateHybrid(*sc, in, options);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 5u);
  const HybridSimRow& pipe = Row(*rows, "pipeline-only");
  const HybridSimRow& sdp = Row(*rows, "sdp-only forward");
  const HybridSimRow& mixed = Row(*rows, "mixed forward");
  ASSERT_TRUE(pipe.row.status.ok() && sdp.row.status.ok() && mixed.row.status.ok());
  // Every planned MB of the pipeline part completed in the simulator.
  EXPECT_DOUBLE_EQ(pipe.sim_pipeline_mbs, 16);
  EXPECT_GT(pipe.sim_pipeline_s, 0);
  EXPECT_EQ(sdp.sim_pipeline_s, 0);
  EXPECT_GT(Count(mixed, scheduler::NodeRole::kSdp), 0);
  EXPECT_GT(Count(mixed, scheduler::NodeRole::kPipeline), 0);
  EXPECT_GT(mixed.tokens_per_s, std::max(pipe.tokens_per_s, sdp.tokens_per_s));
  // The mix's SDP nodes are the fast uplinks: its slowest averaging node
  // is faster than SDP-only's.
  EXPECT_LT(mixed.row.plan.averaging_s, sdp.row.plan.averaging_s);
  const std::string table = FormatHybridSim(*sc, in, *rows);
  EXPECT_NE(table.find("mixed forward"), std::string::npos) << table;
}

// The heterogeneous-memory variant of SkipPipe's 12-region file
// (scenarios/gcp20-hybrid-halfmem.json: n1, n3, .., n19 hold one stage):
// the inputs come from the file's "hybrid" object; the mixed plan is no
// worse than the better pure plan for both maskings, and with backward
// masking it runs the one-stage nodes as a pipeline beside the subnetworks,
// every planned pipeline MB completing in the simulator.
TEST(HybridSimTest, HalfTheNodesHoldingOneStageRunAPipelineBesideTheSubnetworks) {
  absl::StatusOr<SimScenario> sc = LoadSimScenario("sim/scenarios/gcp20-hybrid-halfmem.json", 1);
  ASSERT_TRUE(sc.ok()) << sc.status();
  ASSERT_TRUE(sc->hybrid.has_value());
  sc->iterations = 2;
  SimOptions options;
  absl::StatusOr<std::vector<HybridSimRow>> rows = SimulateHybrid(*sc, *sc->hybrid, options);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 5u);
  const HybridSimRow& pipe = Row(*rows, "pipeline-only");
  ASSERT_TRUE(pipe.row.status.ok()) << pipe.row.status;
  for (const std::string masking : {"forward", "backward"}) {
    const HybridSimRow& sdp = Row(*rows, "sdp-only " + masking);
    const HybridSimRow& mixed = Row(*rows, "mixed " + masking);
    ASSERT_TRUE(sdp.row.status.ok() && mixed.row.status.ok()) << masking;
    EXPECT_GE(mixed.tokens_per_s, std::max(pipe.tokens_per_s, sdp.tokens_per_s)) << masking;
    for (int v = 1; v < 20; v += 2) {
      EXPECT_NE(mixed.row.plan.roles[v], scheduler::NodeRole::kSdp) << masking << " n" << v;
    }
  }
  const HybridSimRow& mixed = Row(*rows, "mixed backward");
  EXPECT_GT(Count(mixed, scheduler::NodeRole::kSdp), 0);
  EXPECT_GT(Count(mixed, scheduler::NodeRole::kPipeline), 0);
  EXPECT_DOUBLE_EQ(mixed.sim_pipeline_mbs, mixed.row.plan.pipeline_mbs);
}

}  // namespace
}  // namespace skipswarm::sim
