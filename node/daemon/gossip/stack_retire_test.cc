#include "node/daemon/gossip/stack_retire.h"

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/sim_clock.h"
#include "gtest/gtest.h"
#include "node/compute/timed_stage_compute.h"
#include "node/daemon/stack/planner_factory.h"
#include "node/train/inproc_group.h"
#include "node/train/scheduler_repairer.h"
#include "node/transport/inproc_transport.h"

namespace skipswarm::node {
namespace {

constexpr char kSwarmId[] = "retire-test";

struct Recorder : OriginListener {
  void OnTail(uint64_t, uint64_t, double) override {}
  void OnFinished(uint64_t, uint64_t mb, const absl::Status& s) override { finished[mb] = s; }
  std::map<uint64_t, absl::Status> finished;
};

// An origin (a bare stage-0 server) and a relay whose stage 1 is a
// TrainingStack, as the gossip daemon builds it, on the in-process
// transport.
class StackRetireTest : public ::testing::Test {
 protected:
  StackRetireTest()
      : board_(&clock_, [] {
          SwitchboardOptions so;
          so.latency = absl::Milliseconds(1);
          so.swarm_id = kSwarmId;
          return so;
        }()) {
    members_ = {{common::NodeId::ForName("d0"), {0}, 4, "", ""},
                {common::NodeId::ForName("r1"), {1}, 4, "", ""}};
    hub_ = std::make_unique<InProcessGroupHub>(&clock_, members_);
    view_ = std::make_unique<StaticSwarmView>(members_);
    origin_compute_ = std::make_unique<TimedStageCompute>(&clock_, TimedStageCompute::Options{});
    origin_transport_ = *board_.Attach(members_[0].id);
    StageServerOptions so;
    so.swarm_id = kSwarmId;
    std::map<int, StageCompute*> stages = {{0, origin_compute_.get()}};
    origin_ = std::make_unique<StageServer>(origin_transport_.get(), &clock_, view_.get(),
                                            std::move(stages), so);
    origin_->Attach();
    origin_->SetOriginListener(&recorder_);

    NodeDaemonOptions o;
    o.model.model.num_layers = 2;
    o.model.model.num_stages = 2;
    o.model.model.seq_len = 8;
    o.model.samples_per_mb = 2;
    relay_compute_ = std::make_unique<TimedStageCompute>(
        &clock_, TimedStageCompute::Options{.stage = 1, .forward = absl::Milliseconds(50)});
    relay_transport_ = *board_.Attach(members_[1].id);
    repairer_ = std::make_unique<SchedulerRouteRepairer>(DaemonRepairerOptions(o, &clock_));
    TrainingStackInputs in;
    in.transport = relay_transport_.get();
    in.clock = &clock_;
    in.routing = view_.get();
    in.group = hub_.get();
    in.repairer = repairer_.get();
    in.stages = {{1, relay_compute_.get()}};
    in.swarm_id = kSwarmId;
    auto stack = TrainingStack::Create(o, in);
    EXPECT_TRUE(stack.ok()) << stack.status();
    if (stack.ok()) relay_ = *std::move(stack);
  }
  ~StackRetireTest() override {
    relay_.reset();
    origin_->Detach();
    origin_->SetOriginListener(nullptr);
    origin_.reset();
    relay_transport_.reset();
    origin_transport_.reset();
    while (clock_.RunNext()) {  // timers that reference the computes run out first
    }
  }

  // Starts micro-batch `mb` of iteration 0 at the origin through the relay,
  // and lets the relay admit it and start its forward (50 ms).
  void InjectAndLetTheRelayHoldIt(uint64_t mb) {
    std::vector<RouteHop> route = {{members_[0].id, 0}, {members_[1].id, 1}};
    ASSERT_TRUE(origin_->Inject(0, mb, route, {}).ok());
    clock_.Advance(absl::Milliseconds(20));  // origin forward 10 ms, hop 1 ms
    ASSERT_EQ(relay_->server()->stats().slots_in_use, 1);
    ASSERT_EQ(recorder_.finished.count(mb), 0u);
  }

  common::SimClock clock_;
  Switchboard board_;
  std::vector<PeerInfo> members_;
  std::unique_ptr<InProcessGroupHub> hub_;
  std::unique_ptr<StaticSwarmView> view_;
  std::unique_ptr<TimedStageCompute> origin_compute_;
  std::unique_ptr<Transport> origin_transport_;
  std::unique_ptr<StageServer> origin_;
  Recorder recorder_;
  std::unique_ptr<TimedStageCompute> relay_compute_;
  std::unique_ptr<Transport> relay_transport_;
  std::unique_ptr<RouteRepairer> repairer_;
  std::unique_ptr<TrainingStack> relay_;
};

// Note [Relay drops]: a relay's stack retired while it holds another
// origin's micro-batch (a re-entry, a stage move, a stop) tells the origin
// at once, well before any MB deadline; its compute keeps nothing of it.
TEST_F(StackRetireTest, RetiredRelayTellsTheOriginAtOnce) {
  ASSERT_NE(relay_, nullptr);
  InjectAndLetTheRelayHoldIt(5);
  RetireStack(std::move(relay_));
  clock_.Advance(absl::Milliseconds(5));  // one hop back
  ASSERT_EQ(recorder_.finished.count(5), 1u);
  EXPECT_TRUE(absl::IsAborted(recorder_.finished[5])) << recorder_.finished[5];
  EXPECT_EQ(origin_->stats().slots_in_use, 0);
  clock_.Advance(absl::Milliseconds(100));  // the forward that was running ends
  EXPECT_EQ(relay_compute_->pending(), 0u);
}

}  // namespace
}  // namespace skipswarm::node
