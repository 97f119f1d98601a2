#include "node/daemon/stack/stage_computes.h"

#include <map>
#include <memory>

#include "common/sim_clock.h"
#include "gtest/gtest.h"
#include "node/compute/timed_stage_compute.h"

namespace skipswarm::node {
namespace {

NodeDaemonOptions Options() {
  NodeDaemonOptions o;
  o.model.model.num_layers = 2;
  o.model.model.num_stages = 2;
  o.model.model.d_model = 16;
  o.model.model.num_heads = 2;
  o.model.model.ffn_dim = 32;
  o.model.model.seq_len = 8;
  o.iterations = 10;
  return o;
}

TEST(StageComputesTest, TorchByDefault) {
  common::SimClock clock;
  ThreadTaskRunner runner;
  auto c = CreateStageCompute(Options(), 1, &runner, &clock);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_NE(dynamic_cast<TorchStageCompute*>(c->get()), nullptr);
  EXPECT_EQ((*c)->stage(), 1);
  EXPECT_EQ((*c)->step(), 0);
}

TEST(StageComputesTest, TimedWhenAForwardTimeIsGiven) {
  common::SimClock clock;
  ThreadTaskRunner runner;
  NodeDaemonOptions o = Options();
  o.wan.timed_forward_s = 0.5;
  auto c = CreateStageCompute(o, 0, &runner, &clock);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_NE(dynamic_cast<TimedStageCompute*>(c->get()), nullptr);
  EXPECT_EQ((*c)->stage(), 0);
}

TEST(StageComputesTest, BorrowsByStage) {
  common::SimClock clock;
  std::map<int, std::unique_ptr<TimedStageCompute>> owned;
  for (int s : {0, 2}) {
    TimedStageCompute::Options o;
    o.stage = s;
    owned[s] = std::make_unique<TimedStageCompute>(&clock, o);
  }
  const std::map<int, StageCompute*> borrowed = BorrowComputes(owned);
  ASSERT_EQ(borrowed.size(), 2u);
  EXPECT_EQ(borrowed.at(0), owned[0].get());
  EXPECT_EQ(borrowed.at(2), owned[2].get());
}


TEST(StageComputesTest, BackwardMaskingGetsFrozenCopiesOfTheOtherStages) {
  ThreadTaskRunner runner;
  NodeDaemonOptions o = Options();
  o.model.model.num_layers = 4;
  o.model.model.num_stages = 4;
  auto none = CreateFrozenStageComputes(o, {0, 2}, &runner);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());  // --sdp off (and forward: nothing frozen)
  o.sdp = model::SdpMode::kBackward;
  auto frozen = CreateFrozenStageComputes(o, {0, 2}, &runner);
  ASSERT_TRUE(frozen.ok()) << frozen.status();
  ASSERT_EQ(frozen->size(), 2u);
  EXPECT_EQ(frozen->count(1), 1u);
  EXPECT_EQ(frozen->count(3), 1u);
  EXPECT_EQ(CreateFrozenStageComputes(o, {1, 2}, &runner).status().code(),
            absl::StatusCode::kInvalidArgument);  // not a data node
}

}  // namespace
}  // namespace skipswarm::node
