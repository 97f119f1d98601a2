// Note [Relay without a data node] (data_node_wait.h): a relay whose view
// has no live data node waits on the injected clock instead of running
// empty iterations, goes on as soon as a data node is back (Note [Waking
// on a data node]: at once when the group learns of it), and stops at once
// while it waits. Real gRPC replica groups over loopback on the simulated
// clock (Note [Patience in the gRPC group tests]), and the simulator's
// in-process hub.
#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "common/sim_clock.h"
#include "gtest/gtest.h"
#include "node/stage/stage_server.h"
#include "node/stage/swarm_view.h"
#include "node/train/data_node_wait.h"
#include "node/train/grpc_group.h"
#include "node/train/grpc_group_test_util.h"
#include "node/train/inproc_group.h"
#include "node/train/node_trainer.h"
#include "node/transport/inproc_transport.h"

namespace skipswarm::node {
namespace {

using common::NodeId;
using grpc_group_testing::LoopbackGroups;
using grpc_group_testing::SimDriver;
using grpc_group_testing::StartLoopbackGroups;

// Relay r (stage 1, hosting no compute: an iteration is a barrier, the
// server's end of iteration and the report) and data node d (stage 0),
// each with a gRPC group; the test plays d's part by hand.
class RelayWithoutDataNodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Note [Data node entered later]: what the daemon reads from records.
    absl::StatusOr<LoopbackGroups> swarm =
        StartLoopbackGroups(members_, &clock_, [this](GrpcGroupOptions& o) {
          o.data_node_enters_after = [this](uint64_t it) -> std::optional<uint64_t> {
            const uint64_t entry = data_node_entry_.load();
            if (entry > it) return entry;
            return std::nullopt;
          };
        });
    ASSERT_TRUE(swarm.ok()) << swarm.status();
    swarm_ = *std::move(swarm);
    auto endpoint = board_.Attach(relay_);
    ASSERT_TRUE(endpoint.ok()) << endpoint.status();
    transport_ = *std::move(endpoint);
    server_ = std::make_unique<StageServer>(transport_.get(), &clock_, &view_,
                                            std::map<int, StageCompute*>{},
                                            StageServerOptions{});
    server_->Attach();
    trainer_ = std::make_unique<NodeTrainer>(server_.get(), std::map<int, StageCompute*>{},
                                             /*driver=*/nullptr, swarm_.groups[0].get(),
                                             &clock_);
  }
  void TearDown() override {
    trainer_.reset();
    if (server_) server_->Detach();
    swarm_.groups.clear();
  }
  // d out of (or back in) the relay's view: not a replica of stage 0.
  void DataNodeInView(bool in) { swarm_.views[0]->SetPaused(data_, !in); }
  void Run(uint64_t count) {
    trainer_->Run(0, count, [this](const NodeIterationReport&) { ++iterations_; },
                  [this](absl::Status s) { done_ = s; });
  }

  common::SimClock clock_;
  SimDriver sim_{&clock_};
  const NodeId relay_ = NodeId::ForName("relay");
  const NodeId data_ = NodeId::ForName("data");
  // The relay first: StartLoopbackGroups's groups[0] and views[0].
  const std::vector<PeerInfo> members_ = {{relay_, {1}, 4, "", ""}, {data_, {0}, 4, "", ""}};
  StaticSwarmView view_{members_};
  Switchboard board_{&clock_};
  LoopbackGroups swarm_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<StageServer> server_;
  std::unique_ptr<NodeTrainer> trainer_;
  std::atomic<int> iterations_{0};
  // The entry a live data node's record names (0: none enters later).
  std::atomic<uint64_t> data_node_entry_{0};
  std::optional<absl::Status> done_;
};

// The swarm's only data node left: 60 simulated seconds complete no
// iteration (before the fix: all 2000, back to back, within the first
// instant), and a data node that comes back is followed at once.
TEST_F(RelayWithoutDataNodeTest, WaitsWithoutIterationsAndFollowsADataNodeThatComesBack) {
  DataNodeInView(false);
  Run(2000);
  sim_.AdvanceTo(absl::Seconds(60), absl::Milliseconds(100));
  EXPECT_EQ(iterations_.load(), 0);
  EXPECT_FALSE(done_.has_value()) << *done_;
  // The relay asks again at most DataNodeWait::kMax later, arrives at
  // barrier 0 and waits for d there.
  DataNodeInView(true);
  const absl::Duration back = clock_.SteadyNow();
  sim_.AdvanceTo(back + DataNodeWait::kMax, absl::Milliseconds(100));
  EXPECT_EQ(iterations_.load(), 0);
  for (uint64_t i = 0; i < 3; ++i) {
    swarm_.groups[1]->Barrier(i, data_, /*data_node=*/true, [](absl::Status) {});
    ASSERT_TRUE(sim_.Until([&] { return iterations_.load() == static_cast<int>(i) + 1; }))
        << "iteration " << i << " did not complete after the data node's barrier";
  }
  EXPECT_EQ(iterations_.load(), 3);
  EXPECT_FALSE(done_.has_value());
}

// Note [Waking on a data node]: the data node's barrier message wakes the
// waiting relay with no simulated time passing (before: its next back-off
// retry, up to DataNodeWait::kMax later).
TEST_F(RelayWithoutDataNodeTest, ADataNodesBarrierWakesTheRelayAtOnce) {
  DataNodeInView(false);
  Run(2000);
  sim_.AdvanceTo(absl::Seconds(60), absl::Milliseconds(100));
  ASSERT_EQ(iterations_.load(), 0);
  const absl::Duration back = clock_.SteadyNow();
  DataNodeInView(true);
  swarm_.groups[1]->Barrier(0, data_, /*data_node=*/true, [](absl::Status) {});
  ASSERT_TRUE(sim_.Until([&] { return iterations_.load() == 1; }))
      << "the relay did not wake on the data node's barrier";
  EXPECT_EQ(clock_.SteadyNow(), back);
  EXPECT_FALSE(done_.has_value());
}

// Note [Data node entered later]: the swarm's only data node came back
// entering at 3 (a restore from a peer's copy at the iteration another
// relay waits in), so it is in nobody's view before 3. The relay, waiting
// in 0, passes 0, 1 and 2 empty at once and trains with it from 3. Before,
// it waited in 0 for good: no data node of 0 ever came, and the data
// node's micro-batches of 3 waited at it out their deadline.
TEST_F(RelayWithoutDataNodeTest, PassesTheIterationsBeforeALaterDataNodesEntry) {
  DataNodeInView(false);
  Run(2000);
  sim_.AdvanceTo(absl::Seconds(10), absl::Milliseconds(100));
  ASSERT_EQ(iterations_.load(), 0);
  data_node_entry_.store(3);
  // What its log names: the iterations it passes empty, for the entry at 3.
  EXPECT_EQ(swarm_.groups[0]->LaterDataNodeEntry(0), std::optional<uint64_t>(3));
  EXPECT_EQ(swarm_.groups[0]->LaterDataNodeEntry(3), std::nullopt);
  // Its next ask, at most DataNodeWait::kMax later.
  sim_.AdvanceTo(clock_.SteadyNow() + DataNodeWait::kMax, absl::Milliseconds(100));
  ASSERT_TRUE(sim_.Until([&] { return iterations_.load() == 3; }))
      << "the relay still waits in " << iterations_.load();
  // At the entry the data node is in its view: it waits for its barrier,
  // not past it.
  sim_.AdvanceTo(clock_.SteadyNow() + absl::Seconds(10), absl::Milliseconds(100));
  EXPECT_EQ(iterations_.load(), 3);
  DataNodeInView(true);
  // A data node in the view trains in the iteration: nothing passes empty.
  EXPECT_EQ(swarm_.groups[0]->LaterDataNodeEntry(2), std::nullopt);
  swarm_.groups[1]->Barrier(3, data_, /*data_node=*/true, [](absl::Status) {});
  ASSERT_TRUE(sim_.Until([&] { return iterations_.load() == 4; }))
      << "iteration 3 did not complete after the data node's barrier";
  EXPECT_FALSE(done_.has_value());
}

// Stop while the relay waits: the run ends at once (CANCELLED), with no
// time passing.
TEST_F(RelayWithoutDataNodeTest, StopEndsTheWaitAtOnce) {
  DataNodeInView(false);
  Run(2000);
  sim_.AdvanceTo(absl::Seconds(30), absl::Milliseconds(100));
  const absl::Duration stopped_at = clock_.SteadyNow();
  EXPECT_EQ(trainer_->Stop(), 0u);
  ASSERT_TRUE(sim_.Until([&] { return done_.has_value(); }));
  EXPECT_EQ(clock_.SteadyNow(), stopped_at);
  EXPECT_TRUE(absl::IsCancelled(*done_)) << *done_;
  EXPECT_EQ(iterations_.load(), 0);
}

// The same relay on the simulator's in-process hub: the swarm's only data
// node dies, 60 simulated seconds complete no iteration (before: the hub
// answered "a data node is live" and all 2000 ran back to back at once),
// and the data node's return wakes the relay with no time passing.
TEST(RelayOnTheHubTest, WaitsWhileTheOnlyDataNodeIsDeadAndWakesWhenItIsBack) {
  common::SimClock clock;
  const NodeId relay = NodeId::ForName("relay");
  const NodeId data = NodeId::ForName("data");
  const std::vector<PeerInfo> members = {{relay, {1}, 4, "", ""}, {data, {0}, 4, "", ""}};
  InProcessGroupHub hub(&clock, members);
  StaticSwarmView view(members);
  Switchboard board(&clock);
  auto transport = board.Attach(relay);
  ASSERT_TRUE(transport.ok()) << transport.status();
  StageServer server(transport->get(), &clock, &view, std::map<int, StageCompute*>{},
                     StageServerOptions{});
  server.Attach();
  std::atomic<int> iterations{0};
  std::optional<absl::Status> done;
  {
    NodeTrainer trainer(&server, std::map<int, StageCompute*>{}, /*driver=*/nullptr, &hub,
                        &clock);
    EXPECT_TRUE(hub.HasLiveDataNode(0));
    hub.MarkDead(data);
    EXPECT_FALSE(hub.HasLiveDataNode(0));
    trainer.Run(0, 2000, [&](const NodeIterationReport&) { ++iterations; },
                [&](absl::Status s) { done = s; });
    for (int i = 0; i < 600; ++i) clock.Advance(absl::Milliseconds(100));
    EXPECT_EQ(iterations.load(), 0);
    EXPECT_FALSE(done.has_value());
    const absl::Duration back = clock.SteadyNow();
    hub.Admit(members[1], 0);
    hub.Barrier(0, data, /*data_node=*/true, [](absl::Status) {});
    clock.RunDue();
    EXPECT_EQ(iterations.load(), 1);
    EXPECT_EQ(clock.SteadyNow(), back);
    EXPECT_EQ(trainer.Stop(), 1u);
    clock.RunDue();
  }
  server.Detach();
}

}  // namespace
}  // namespace skipswarm::node
