// DataNodeDriver's teardown on the real clock (data_node_driver.h): a
// driver destroyed while its micro-batch deadlines fire on the clock's
// thread must not act after its destructor returned.
#include <atomic>
#include <memory>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/real_clock.h"
#include "gtest/gtest.h"
#include "node/stage/stage_server.h"
#include "node/stage/swarm_view.h"
#include "node/train/data_node_driver.h"
#include "node/train/data_source.h"
#include "node/train/route_planner.h"
#include "node/transport/inproc_transport.h"

namespace skipswarm::node {
namespace {

// Stage 0 of one stage: starts never finish, so every micro-batch stays in
// flight until its deadline; the server's Abandon discards it here. A
// discard while `gone` is set came from a deadline callback that outlived
// its driver.
class NeverFinishingCompute final : public StageCompute {
 public:
  explicit NeverFinishingCompute(const std::atomic<bool>* gone) : gone_(gone) {}
  int stage() const override { return 0; }
  int64_t num_params() const override { return 0; }
  void Start(uint64_t, MicroBatchData, TensorDone) override {}
  void Forward(uint64_t, WireTensor, TensorDone) override {}
  void Tail(uint64_t, WireTensor, TailDone) override {}
  void Backward(uint64_t, WireTensor, TensorDone) override {}
  bool Discard(uint64_t) override {
    // Some work, so a late callback overlaps the destructor more often.
    volatile int spin = 0;
    for (int i = 0; i < 1000; ++i) spin = spin + i;
    if (gone_->load()) late_.fetch_add(1);
    return true;
  }
  size_t pending() const override { return 0; }
  absl::StatusOr<GradientSum> TakeGradients() override { return GradientSum{}; }
  absl::StatusOr<UpdateStats> ApplyUpdate(const std::vector<float>&, int64_t) override {
    return UpdateStats{};
  }
  void ZeroGrad() override {}
  uint64_t ParamsDigest() override { return 0; }
  int64_t step() const override { return 0; }
  absl::Status SaveCheckpoint(const std::string&) override { return absl::OkStatus(); }
  absl::StatusOr<int64_t> LoadCheckpoint(const std::string&) override { return 0; }

  int late() const { return late_.load(); }

 private:
  const std::atomic<bool>* gone_;
  std::atomic<int> late_{0};
};

TEST(DataNodeDriverTeardownTest, NoDeadlineActsAfterTheDriverIsDestroyedOnTheRealClock) {
  std::unique_ptr<common::RealClock> clock = common::RealClock::Create();
  const common::NodeId self = common::NodeId::ForName("data");
  const std::vector<PeerInfo> members = {{self, {0}, 4, "", ""}};
  StaticSwarmView view(members);
  Switchboard board(clock.get());
  auto endpoint = board.Attach(self);
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  std::unique_ptr<Transport> transport = *std::move(endpoint);
  std::atomic<bool> gone{false};
  NeverFinishingCompute compute(&gone);
  InOrderPlanner planner;
  SyntheticDataSource data(/*samples=*/1, /*seq=*/4, /*vocab=*/16);
  DriverOptions options;
  options.mbs_per_iteration = 4;
  options.num_stages = 1;
  options.initial_deadline = absl::ZeroDuration();  // every deadline fires at once

  for (int round = 0; round < 1000; ++round) {
    StageServer server(transport.get(), clock.get(), &view, {{0, &compute}},
                       StageServerOptions{});
    server.Attach();
    server.BeginIteration(0);
    auto driver = std::make_unique<DataNodeDriver>(&server, clock.get(), &view, &planner,
                                                   &data, options);
    driver->RunIteration(0, [](IterationReport) {});
    driver.reset();  // while the deadlines fire on the clock's thread
    gone = true;
    // The clock runs callbacks one at a time, in order: once this marker
    // runs, no deadline callback of this round is still running.
    absl::Notification drained;
    clock->RunAfter(absl::ZeroDuration(), [&drained] { drained.Notify(); });
    drained.WaitForNotification();
    gone = false;
    server.Detach();
  }
  EXPECT_EQ(compute.late(), 0) << "deadline callbacks ran after their driver was destroyed";
}

}  // namespace
}  // namespace skipswarm::node
