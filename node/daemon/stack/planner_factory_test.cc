#include "node/daemon/stack/planner_factory.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "common/sim_clock.h"
#include "gtest/gtest.h"

namespace skipswarm::node {
namespace {

NodeDaemonOptions Options() {
  NodeDaemonOptions o;
  o.name = "d0";
  o.model.model.num_layers = 6;
  o.model.model.num_stages = 3;
  o.model.model.d_model = 16;
  o.model.model.seq_len = 8;
  o.model.samples_per_mb = 2;
  o.model.seed = 7;
  o.path_length = 2;
  return o;
}

TEST(PlannerFactoryTest, DaemonsPlanWithSkipPipeByDefault) {
  EXPECT_EQ(NodeDaemonOptions().planner, "skippipe");
  EXPECT_TRUE(NodeDaemonOptions().planner_link_costs);
  auto planner = CreateDataNodePlanner(Options(), {}, nullptr);
  ASSERT_TRUE(planner.ok()) << planner.status();
  EXPECT_EQ((*planner)->name(), "skippipe");
}

// Note [Planning from measured links]: the transfer term needs the bytes
// of one hop as the computes send them.
TEST(PlannerFactoryTest, ActivationBytesFollowTheModelAndTheCodec) {
  NodeDaemonOptions o = Options();
  ASSERT_EQ(o.activation_encode.codec, model::Codec::kRawFp32);
  EXPECT_EQ(ActivationBytesPerMicroBatch(o), 2 * 8 * 16 * 4);  // samples x seq x d_model x fp32
  o.activation_encode.codec = model::Codec::kFp16;
  EXPECT_EQ(ActivationBytesPerMicroBatch(o), 2 * 8 * 16 * 2);
  o.activation_encode.codec = model::Codec::kRawFp32;
  o.wan.timed_forward_s = 0.1;  // timed compute sends its dummy payload
  o.wan.timed_payload_bytes = 12345;
  EXPECT_EQ(ActivationBytesPerMicroBatch(o), 12345);
}

TEST(PlannerFactoryTest, SchedulerOptionsComeFromTheDaemonOptions) {
  NodeDaemonOptions o = Options();
  o.planner = "noskip";
  o.planner_link_costs = false;
  const SchedulerPlannerOptions po = DataNodeSchedulerOptions(o, nullptr);
  EXPECT_EQ(po.planner, "noskip");
  EXPECT_EQ(po.path_length, 2);
  EXPECT_EQ(po.costs.layers_per_stage, 2);  // 6 layers over 3 stages
  EXPECT_EQ(po.costs.samples_per_mb, 2);
  EXPECT_EQ(po.seed, 7u);
  EXPECT_EQ(po.costs.bytes_per_mb, 1024);
  EXPECT_FALSE(po.costs.link_costs);
}

// Every field of PlanningCosts, so a field added there is compared here
// once it is added to this list.
void ExpectSameCosts(const PlanningCosts& a, const PlanningCosts& b) {
  EXPECT_EQ(a.layers_per_stage, b.layers_per_stage);
  EXPECT_EQ(a.samples_per_mb, b.samples_per_mb);
  EXPECT_EQ(a.sec_per_layer_sample, b.sec_per_layer_sample);
  EXPECT_EQ(a.hop_s, b.hop_s);
  EXPECT_EQ(a.bytes_per_mb, b.bytes_per_mb);
  EXPECT_EQ(a.link_costs, b.link_costs);
  EXPECT_EQ(a.throughput_ttl, b.throughput_ttl);
  EXPECT_EQ(a.clock, b.clock);
}

// Repairs cost hops as plans do (Note [Planning from measured links]).
TEST(PlannerFactoryTest, RepairerOptionsMatchThePlannersCosts) {
  for (bool link_costs : {true, false}) {
    NodeDaemonOptions o = Options();
    o.planner_link_costs = link_costs;
    common::SimClock clock;
    const SchedulerPlannerOptions po = DataNodeSchedulerOptions(o, &clock);
    const SchedulerRepairerOptions ro = DaemonRepairerOptions(o, &clock);
    ExpectSameCosts(ro.costs, po.costs);
    EXPECT_EQ(ro.costs.layers_per_stage, 2);
    EXPECT_EQ(ro.costs.samples_per_mb, 2);
    EXPECT_EQ(ro.costs.bytes_per_mb, 1024);
    EXPECT_EQ(ro.costs.link_costs, link_costs);
    EXPECT_EQ(ro.costs.clock, &clock);  // throughputs age (Note [Planning from measured links])
    EXPECT_EQ(ro.max_swaps, SchedulerRepairerOptions().max_swaps);  // route rules: defaults
    EXPECT_EQ(ro.max_jump, SchedulerRepairerOptions().max_jump);
    EXPECT_FALSE(ro.costs.sec_per_layer_sample_of);  // the view's speeds and links,
    EXPECT_FALSE(ro.costs.hop_s_of);                 // not the simulator's
  }
}

TEST(PlannerFactoryTest, BuildsEachKindOfPlanner) {
  NodeDaemonOptions o = Options();
  o.planner = "inorder";
  auto in_order = CreateDataNodePlanner(o, {}, nullptr);
  ASSERT_TRUE(in_order.ok()) << in_order.status();
  EXPECT_EQ((*in_order)->name(), InOrderPlanner().name());

  o.planner = "nope";
  EXPECT_FALSE(CreateDataNodePlanner(o, {}, nullptr).ok());

  // A routes file replays named nodes: static lists only.
  const std::string dir = ::testing::TempDir();
  o.planner = "skippipe";
  o.wan.routes_file = dir + "/planner_factory_test.routes";
  std::ofstream(o.wan.routes_file) << "d0 0 d0/0 s1/1 s2/2\n";
  const std::map<std::string, PeerId> names = {{"d0", common::NodeId::ForName("d0")},
                                                {"s1", common::NodeId::ForName("s1")},
                                                {"s2", common::NodeId::ForName("s2")}};
  auto replay = CreateDataNodePlanner(o, names, nullptr);
  ASSERT_TRUE(replay.ok()) << replay.status();
  EXPECT_EQ((*replay)->name(), "routes-file");
  EXPECT_EQ(CreateDataNodePlanner(o, {}, nullptr).status().code(), absl::StatusCode::kInvalidArgument);

  // Recording wraps whichever planner was built and keeps its name.
  o.wan.routes_file.clear();
  o.record_routes = dir + "/planner_factory_test.record";
  std::filesystem::remove(o.record_routes);
  auto recorded = CreateDataNodePlanner(o, {}, nullptr);
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  EXPECT_EQ((*recorded)->name(), "skippipe");
  EXPECT_TRUE(std::filesystem::exists(o.record_routes));
}

}  // namespace
}  // namespace skipswarm::node
