// NodeTrainer's teardown and stop contracts (node_trainer.h): destroying a trainer
// waits for an iteration callback in progress, so what the callback uses
// (a daemon's gossip side, Note [Gossip daemon teardown]) may go right
// after the trainer.
#include "node/train/node_trainer.h"

#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "common/sim_clock.h"
#include "node/train/forwarding_group.h"
#include "gtest/gtest.h"
#include "node/stage/stage_server.h"
#include "node/stage/swarm_view.h"
#include "node/train/inproc_group.h"
#include "node/transport/inproc_transport.h"

namespace skipswarm::node {
namespace {

// The hub, except that it always knows a live data node: these cases drive
// a relay alone through its iterations, which the hub's true answer (no
// data node: Note [Relay without a data node] in data_node_wait.h) would
// hold in the wait.
class AlwaysADataNode final : public ForwardingGroup {
 public:
  using ForwardingGroup::ForwardingGroup;
  bool HasLiveDataNode(uint64_t) override { return true; }
};

// One relay that hosts no stage: an iteration is a barrier, the server's
// end of iteration and the report, all on the SimClock.
class NodeTrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto endpoint = board_.Attach(self_);
    ASSERT_TRUE(endpoint.ok()) << endpoint.status();
    transport_ = *std::move(endpoint);
    server_ = std::make_unique<StageServer>(transport_.get(), &clock_, &view_,
                                            std::map<int, StageCompute*>{},
                                            StageServerOptions{});
    server_->Attach();
  }
  void TearDown() override {
    if (server_) server_->Detach();
  }
  std::unique_ptr<NodeTrainer> MakeTrainer() {
    return std::make_unique<NodeTrainer>(server_.get(), std::map<int, StageCompute*>{},
                                         /*driver=*/nullptr, &group_, &clock_);
  }

  common::SimClock clock_;
  const common::NodeId self_ = common::NodeId::ForName("relay");
  const std::vector<PeerInfo> members_ = {{self_, {1}, 4, "", ""}};
  InProcessGroupHub hub_{&clock_, members_};
  AlwaysADataNode group_{&hub_};
  StaticSwarmView view_{members_};
  Switchboard board_{&clock_};
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<StageServer> server_;
};

TEST_F(NodeTrainerTest, DestructionWaitsForAnIterationCallbackInProgress) {
  common::SimClock& clock = clock_;
  std::unique_ptr<NodeTrainer> trainer = MakeTrainer();

  absl::Notification entered, release, returned;
  trainer->Run(0, 1,
               [&](const NodeIterationReport&) {
                 entered.Notify();
                 release.WaitForNotification();
                 returned.Notify();
               },
               [](absl::Status) {});
  // The clock's callbacks (the iteration, then its report) on their own
  // thread, as a daemon's trainer runs beside its main thread.
  std::thread pump([&] {
    while (clock.RunNext()) {
    }
  });
  entered.WaitForNotification();
  // The destroyer is running before the callback may go on. Passing does
  // not depend on who wins; a trainer that did not wait would almost
  // always finish destroying first and fail.
  bool callback_had_returned = false;
  absl::Notification destroying;
  std::thread destroyer([&] {
    destroying.Notify();
    trainer.reset();
    callback_had_returned = returned.HasBeenNotified();
  });
  destroying.WaitForNotification();
  release.Notify();
  destroyer.join();
  pump.join();
  EXPECT_TRUE(callback_had_returned);
}

// Note [Stop point]: Stop() returns the iteration the trainer stops after.
// Asked from the report of iteration 2 (the decision to run 3 is taken by
// then), it is 3, and 3 is the last iteration reported; asked between
// iterations, it is the one in progress. Old code: the drain announced the
// daemon's iteration, 2, while the trainer ran 3.
TEST_F(NodeTrainerTest, StopReturnsTheIterationItStopsAfter) {
  common::SimClock& clock = clock_;
  std::unique_ptr<NodeTrainer> first = MakeTrainer();
  NodeTrainer& trainer = *first;
  std::vector<uint64_t> reported;
  std::optional<uint64_t> stops_after;
  std::optional<absl::Status> done;
  trainer.Run(0, 10,
              [&](const NodeIterationReport& r) {
                reported.push_back(r.iteration);
                if (r.iteration == 2) stops_after = trainer.Stop();
              },
              [&](absl::Status s) { done = s; });
  while (clock.RunNext()) {
  }
  ASSERT_TRUE(stops_after.has_value());
  EXPECT_EQ(*stops_after, 3u);
  EXPECT_EQ(reported, (std::vector<uint64_t>{0, 1, 2, 3}));
  ASSERT_TRUE(done.has_value());
  EXPECT_TRUE(absl::IsCancelled(*done)) << *done;

  // Between iterations (nothing running on the clock): the one in progress.
  std::unique_ptr<NodeTrainer> second = MakeTrainer();
  reported.clear();
  second->Run(5, 10, [&](const NodeIterationReport& r) { reported.push_back(r.iteration); },
              [](absl::Status) {});
  EXPECT_EQ(second->Stop(), 5u);
  while (clock.RunNext()) {
  }
  EXPECT_EQ(reported, (std::vector<uint64_t>{5}));
}

}  // namespace
}  // namespace skipswarm::node
