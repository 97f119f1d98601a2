// DataNodeDriver's teardown on the real clock (data_node_driver.h): a
// driver destroyed while its micro-batch deadlines fire on the clock's
// thread must not act after its destructor returned.
#include <dlfcn.h>

#include <atomic>
#include <memory>
#include <thread>
#include <utility>
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

// Note [Holding a Status drop]: under --config=tsan every drop of a shared
// absl::Status representation runs third_party/tsan's interposed drop,
// which calls dladdr (is gRPC the caller?) before it touches the count.
// This binary's dladdr holds the thread that armed it at its next drop
// (and counts it) until `hold_until` is set, so another thread can copy and
// drop the same Status meanwhile on every run (the window in which an
// interposer that took its order before the library's drop missed that
// thread's drops; status_count_test covers the interposer). Elsewhere no
// drop calls dladdr: nothing is counted or held.
namespace {
thread_local bool hold_next_dladdr = false;
thread_local int drops_held = 0;  // on the arming thread: at most one per arming
// Relaxed on purpose: waiting on it gives the held thread no order TSan
// sees (a Notification would order the other thread's accesses itself).
std::atomic<const std::atomic<bool>*> hold_until{nullptr};
}  // namespace

extern "C" int dladdr(const void* address, Dl_info* info) noexcept {
  using Fn = int (*)(const void*, Dl_info*);
  static const Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "dladdr"));
  if (hold_next_dladdr) {
    hold_next_dladdr = false;
    ++drops_held;
    const std::atomic<bool>* until = hold_until.load(std::memory_order_relaxed);
    while (!until->load(std::memory_order_relaxed)) std::this_thread::yield();
  }
  return real(address, info);
}

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
  void SketchForward(WireTensor, uint64_t, SketchDone) override {}
  void SketchBackward(WireTensor, WireTensor, uint64_t, SketchDone) override {}
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

// One data node of stage 0 on the real clock (the deadlines and the
// driver's hand-offs run on the clock's own thread), on a switchboard.
class DataNodeDriverTeardownTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto endpoint = board.Attach(self);
    ASSERT_TRUE(endpoint.ok()) << endpoint.status();
    transport = *std::move(endpoint);
  }

  std::unique_ptr<common::RealClock> clock = common::RealClock::Create();
  const common::NodeId self = common::NodeId::ForName("data");
  StaticSwarmView view{std::vector<PeerInfo>{{self, {0}, 4, "", ""}}};
  Switchboard board{clock.get()};
  std::unique_ptr<Transport> transport;
  std::atomic<bool> gone{false};
  NeverFinishingCompute compute{&gone};
};

TEST_F(DataNodeDriverTeardownTest, NoDeadlineActsAfterTheDriverIsDestroyedOnTheRealClock) {
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

// Plans nothing: the driver pauses (Note [Paused training]).
class NoRoutePlanner final : public RoutePlanner {
 public:
  std::string name() const override { return "none"; }
  absl::StatusOr<std::vector<PlannedRoute>> Plan(const PlanInput&, const SwarmView&) override {
    return absl::UnavailableError("stage 1 has no live replica");
  }
};

// Sets its flag when destroyed: when the clock thread destroys the task
// that held `done`, after the task's copies of the report.
struct SetOnDestroy {
  explicit SetOnDestroy(std::atomic<bool>* flag) : flag(flag) {}
  SetOnDestroy(SetOnDestroy&& other) noexcept : flag(std::exchange(other.flag, nullptr)) {}
  SetOnDestroy(const SetOnDestroy&) = delete;
  ~SetOnDestroy() {
    if (flag != nullptr) flag->store(true, std::memory_order_relaxed);
  }
  std::atomic<bool>* flag;
};

// Cancel hands its CANCELLED report (a Status with a shared, counted
// message) to the clock thread, which runs `done` with it. Cancel used to
// keep a copy and drop it after the hand-off: held inside that drop (Note
// [Holding a Status drop]) until the clock thread had copied the report and
// dropped its own copies, the stopping thread freed the last copy, and with
// the interposer of that time TSan reported the free. The report is now
// moved into the task: the stopping thread holds no copy to drop, which
// the count of held drops checks under --config=tsan (the interposer now
// orders such a free, so a report no longer shows a kept copy).
TEST_F(DataNodeDriverTeardownTest, CancelLeavesNoCopyOfItsReportOnTheStoppingThread) {
  NoRoutePlanner planner;
  SyntheticDataSource data(/*samples=*/1, /*seq=*/4, /*vocab=*/16);
  DriverOptions options;
  options.num_stages = 2;
  options.pause_backoff.initial = absl::Hours(1);  // no re-plan during the case
  StageServer server(transport.get(), clock.get(), &view, {{0, &compute}}, StageServerOptions{});
  server.Attach();
  server.BeginIteration(0);
  DataNodeDriver driver(&server, clock.get(), &view, &planner, &data, options);

  std::atomic<bool> task_gone{false};
  std::atomic<bool> cancelled{false};
  driver.RunIteration(0, [&cancelled, set = SetOnDestroy(&task_gone)](IterationReport r) {
    cancelled.store(absl::IsCancelled(r.status), std::memory_order_relaxed);
  });
  ASSERT_FALSE(driver.paused().ok());
  hold_until.store(&task_gone, std::memory_order_relaxed);
  hold_next_dladdr = true;
  driver.Cancel();
  hold_next_dladdr = false;
  EXPECT_EQ(drops_held, 0) << "Cancel dropped a shared Status on the stopping thread";
  // The clock runs callbacks in order: once this marker ran, so had `done`.
  absl::Notification drained;
  clock->RunAfter(absl::ZeroDuration(), [&drained] { drained.Notify(); });
  drained.WaitForNotification();
  EXPECT_TRUE(cancelled.load(std::memory_order_relaxed));
  server.Detach();
}

}  // namespace
}  // namespace skipswarm::node
