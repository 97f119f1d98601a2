#include "node/daemon/stack/training_stack.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/sim_clock.h"
#include "identity/identity.h"
#include "gtest/gtest.h"
#include "node/compute/timed_stage_compute.h"
#include "node/daemon/stack/planner_factory.h"
#include "node/train/inproc_group.h"
#include "node/train/scheduler_repairer.h"
#include "node/transport/inproc_transport.h"

namespace skipswarm::node {
namespace {

constexpr char kSwarmId[] = "stack-test";

NodeDaemonOptions Options() {
  NodeDaemonOptions o;
  o.model.model.num_layers = 2;
  o.model.model.num_stages = 2;
  o.model.model.seq_len = 8;
  o.model.samples_per_mb = 2;
  o.mbs_per_iteration = 3;
  return o;
}

// A data node (stage 0) and a relay (stage 1) on timed computes, wired as
// the daemons wire theirs, over the in-process transport and group.
class TrainingStackTest : public ::testing::Test {
 public:  // also for the helpers below
  TrainingStackTest()
      : board_(&clock_, [] {
          SwitchboardOptions so;
          so.latency = absl::Milliseconds(1);
          so.swarm_id = kSwarmId;  // frames must carry the stack's swarm id
          return so;
        }()) {
    const std::vector<std::string> names = {"d0", "r1"};
    for (int i = 0; i < 2; ++i) {
      members_.push_back({common::NodeId::ForName(names[i]), {i}, 4, "", ""});
    }
    hub_ = std::make_unique<InProcessGroupHub>(&clock_, members_);
    for (int i = 0; i < 2; ++i) {
      Node& n = nodes_[i];
      TimedStageCompute::Options co;
      co.stage = i;
      n.compute = std::make_unique<TimedStageCompute>(&clock_, co);
      n.view = std::make_unique<StaticSwarmView>(members_);
      n.transport = *board_.Attach(members_[i].id);
      n.repairer = std::make_unique<SchedulerRouteRepairer>(
          DaemonRepairerOptions(options_, &clock_));
    }
  }
  ~TrainingStackTest() override {
    for (Node& n : nodes_) n.stack.reset();
    for (Node& n : nodes_) n.transport.reset();
    while (clock_.RunNext()) {  // timers that reference the computes run out first
    }
  }

  TrainingStackInputs Inputs(int i) {
    Node& n = nodes_[i];
    TrainingStackInputs in;
    in.transport = n.transport.get();
    in.clock = &clock_;
    in.routing = n.view.get();
    in.group = hub_.get();
    in.repairer = n.repairer.get();
    in.stages = {{i, n.compute.get()}};
    in.data = &data_;
    in.swarm_id = kSwarmId;
    return in;
  }

  struct Node {
    std::unique_ptr<TimedStageCompute> compute;
    std::unique_ptr<StaticSwarmView> view;
    std::unique_ptr<Transport> transport;
    std::unique_ptr<RouteRepairer> repairer;
    std::unique_ptr<TrainingStack> stack;
    std::vector<NodeIterationReport> reports;
    bool done = false;
  };

  common::SimClock clock_;
  Switchboard board_;
  std::vector<PeerInfo> members_;
  std::unique_ptr<InProcessGroupHub> hub_;
  SyntheticDataSource data_{2, 8, 256};
  NodeDaemonOptions options_ = Options();
  Node nodes_[2];
};

TEST_F(TrainingStackTest, DataNodeAndRelayTrainTogether) {
  for (int i = 0; i < 2; ++i) {
    auto stack = TrainingStack::Create(options_, Inputs(i));
    ASSERT_TRUE(stack.ok()) << stack.status();
    nodes_[i].stack = *std::move(stack);
  }
  EXPECT_NE(nodes_[0].stack->driver(), nullptr);  // hosts stage 0
  EXPECT_EQ(nodes_[1].stack->driver(), nullptr);
  for (Node& n : nodes_) {
    n.stack->trainer()->Run(
        0, 2, [&n](const NodeIterationReport& r) { n.reports.push_back(r); },
        [&n](absl::Status) { n.done = true; });
  }
  while (!(nodes_[0].done && nodes_[1].done) && clock_.RunNext()) {
  }
  ASSERT_TRUE(nodes_[0].done && nodes_[1].done);
  ASSERT_EQ(nodes_[0].reports.size(), 2u);
  for (const NodeIterationReport& r : nodes_[0].reports) {
    ASSERT_TRUE(r.data.has_value());
    EXPECT_TRUE(r.data->status.ok()) << r.data->status;
    EXPECT_EQ(r.data->completed, 3);  // mbs_per_iteration
    EXPECT_EQ(r.data->dropped, 0);
  }
  EXPECT_EQ(nodes_[0].compute->step(), 2);
  EXPECT_EQ(nodes_[1].compute->step(), 2);
}

// Note [Stated bounds in the daemons]: the cap the daemons give their
// group is made of this stack's driver options, so the data node's own
// statement passes under it, on the fewest memory slots (the most waves)
// and one deadline step after start-up (the driver's deadline factor x its
// start-up deadline: 480 s x (3 waves + 1) = 32 min, where the group's
// fixed default was 10 min).
TEST_F(TrainingStackTest, DataNodeStatementPassesUnderTheDaemonsCap) {
  options_.memory_slots = 1;
  auto stack = TrainingStack::Create(options_, Inputs(0));
  ASSERT_TRUE(stack.ok()) << stack.status();
  nodes_[0].stack = *std::move(stack);
  const absl::Duration cap = TrainingStack::MaxStatedBound(options_);
  const DriverOptions d = TrainingStack::StackOptions(options_, kSwarmId).driver;
  const absl::Duration startup = nodes_[0].stack->driver()->NextIterationBound();
  EXPECT_EQ(startup, d.initial_deadline * (3 + 1));
  EXPECT_LE(startup, cap);
  // One deadline step later, still on one slot (10 min cut this to a third).
  EXPECT_LE(d.initial_deadline * d.deadline_factor * (3 + 1), cap);
  EXPECT_EQ(cap, absl::Minutes(32));
  // The swarm's M sets the waves.
  options_.mbs_per_iteration = 8;
  EXPECT_EQ(TrainingStack::MaxStatedBound(options_), absl::Minutes(72));
}

// Note [Checkable evidence], "Signed swarms": r1 does not sign and its
// record says so; d0 signs. Trains one iteration and returns d0's server
// counters.
StageServerStats TrainWithAnUnsignedRelay(TrainingStackTest& t, bool swarm_signs_frames) {
  auto key = identity::Identity::FromSeed(std::string(32, 'd'));
  EXPECT_TRUE(key.ok()) << key.status();
  if (!key.ok()) return {};
  NodeDaemonOptions signing = t.options_;
  signing.sign_frames = true;
  signing.swarm_signs_frames = swarm_signs_frames;
  TrainingStackInputs in = t.Inputs(0);
  in.signer = key->get();
  in.public_key_of = [](const PeerId&) { return std::nullopt; };
  in.signs_frames = [](const PeerId&) { return false; };  // r1's record
  auto d0 = TrainingStack::Create(signing, in);
  auto r1 = TrainingStack::Create(t.options_, t.Inputs(1));  // signs nothing
  EXPECT_TRUE(d0.ok() && r1.ok());
  if (!d0.ok() || !r1.ok()) return {};
  t.nodes_[0].stack = *std::move(d0);
  t.nodes_[1].stack = *std::move(r1);
  for (TrainingStackTest::Node& n : t.nodes_) {
    n.stack->trainer()->Run(
        0, 1, [](const NodeIterationReport&) {}, [&n](absl::Status) { n.done = true; });
  }
  while (!(t.nodes_[0].done && t.nodes_[1].done) && t.clock_.RunNext()) {
  }
  EXPECT_TRUE(t.nodes_[0].done && t.nodes_[1].done);
  return t.nodes_[0].stack->server()->stats();
}

// Where only d0 signs (a per-node setting) it admits r1's unsigned tails
// as an older peer's.
TEST_F(TrainingStackTest, AnUnsignedFrameIsAdmittedFromAMemberThatSaysItDoesNotSign) {
  EXPECT_EQ(TrainWithAnUnsignedRelay(*this, /*swarm_signs_frames=*/false).commitments_refused, 0);
}

// Where the swarm's manifest says every member signs, d0 refuses them,
// whatever r1's record says.
TEST_F(TrainingStackTest, AnUnsignedFrameIsRefusedInASignedSwarmWhateverTheRecordSays) {
  EXPECT_GT(TrainWithAnUnsignedRelay(*this, /*swarm_signs_frames=*/true).commitments_refused, 0);
  // A swarm that signs needs this node to sign too.
  NodeDaemonOptions half = options_;
  half.swarm_signs_frames = true;
  EXPECT_EQ(TrainingStack::Create(half, Inputs(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A planner error comes back, and the half-built stack (its server
// already attached) goes without leaving a handler behind.
TEST_F(TrainingStackTest, ReturnsThePlannersError) {
  options_.wan.routes_file = "/nonexistent.routes";  // needs names; gossip has none
  auto stack = TrainingStack::Create(options_, Inputs(0));
  EXPECT_EQ(stack.status().code(), absl::StatusCode::kInvalidArgument) << stack.status();
  // A relay builds no planner, so the same options are fine there.
  auto relay = TrainingStack::Create(options_, Inputs(1));
  EXPECT_TRUE(relay.ok()) << relay.status();
}

}  // namespace
}  // namespace skipswarm::node
