// Note [Stopping] (gossip_daemon.cc): a signal while founders wait for the
// swarm to form ends the wait at once; SIGTERM on the last replica of a
// stage stops it with a checkpoint within the stop bound (it used to be
// ignored). GossipDaemons in one process over loopback gRPC (ports 0).
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "node/daemon/gossip/gossip_daemon.h"
#include "node/daemon/stack/torch_backend.h"

namespace skipswarm::node {
namespace {

struct Running {
  std::unique_ptr<GossipDaemon> daemon;
  std::thread thread;
  absl::Status result = absl::UnknownError("running");
  DaemonSignals signals;
  absl::Notification finished;
  absl::Mutex mu;
  int64_t last_iteration ABSL_GUARDED_BY(mu) = -1;
  absl::Notification reached;  // the iteration `reach` finished
  int64_t reach = -1;

  void Start() {
    thread = std::thread([this] {
      result = daemon->Run(&signals);
      finished.Notify();
    });
  }
  void Join() {
    if (thread.joinable()) thread.join();
  }
};

class GossipDaemonStopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/stop";
    std::filesystem::create_directories(dir_);
    corpus_ = dir_ + "/corpus.txt";
    std::ofstream out(corpus_);
    for (int i = 0; i < 400; ++i) out << "the swarm trains line " << i << " of a tiny corpus\n";
  }

  GossipDaemonOptions Options(const std::string& name, std::vector<int> stages) {
    GossipDaemonOptions o;
    o.base.name = name;
    o.base.iterations = 1000000;  // stopped by the test
    o.base.mbs_per_iteration = 2;
    o.base.memory_slots = 2;
    o.base.planner = "inorder";
    o.base.startup_timeout = absl::Seconds(30);
    o.base.model.model.num_layers = 3;
    o.base.model.model.d_model = 16;
    o.base.model.model.num_heads = 2;
    o.base.model.model.ffn_dim = 24;
    o.base.model.model.seq_len = 8;
    o.base.model.model.num_stages = 3;
    o.base.model.samples_per_mb = 2;
    o.base.model.corpus.paths = {corpus_};
    o.base.model.checkpoint_dir = dir_ + "/ckpt-" + name;
    o.gossip.insecure = true;
    o.gossip.swarm_name = "gossip-daemon-stop-test";
    o.stages = std::move(stages);
    o.control_port = -1;
    o.stop_timeout = absl::Seconds(5);
    return o;
  }

  std::unique_ptr<Running> Launch(GossipDaemonOptions o, int64_t reach = -1) {
    auto r = std::make_unique<Running>();
    Running* raw = r.get();
    raw->reach = reach;
    o.observer = [raw](const NodeIterationReport& report) {
      absl::MutexLock lock(&raw->mu);
      raw->last_iteration = static_cast<int64_t>(report.iteration);
      if (raw->reach >= 0 && raw->last_iteration >= raw->reach &&
          !raw->reached.HasBeenNotified()) {
        raw->reached.Notify();
      }
    };
    absl::StatusOr<std::unique_ptr<GossipDaemon>> d = GossipDaemon::Create(o, TorchNodeBackend());
    EXPECT_TRUE(d.ok()) << d.status();
    if (!d.ok()) return nullptr;
    r->daemon = *std::move(d);
    r->Start();
    return r;
  }

  std::string dir_, corpus_;
};

TEST_F(GossipDaemonStopTest, ASignalWhileTheSwarmFormsEndsTheWaitAtOnce) {
  GossipDaemonOptions o = Options("lonely", {0});
  o.expect_members = 3;  // never comes
  o.base.listen = "127.0.0.1:0";
  auto r = Launch(o);
  ASSERT_NE(r, nullptr);
  r->signals.drain.store(true);  // SIGTERM
  // Before: the wait ran to the 30 s startup timeout and failed.
  EXPECT_TRUE(r->finished.WaitForNotificationWithTimeout(absl::Seconds(15)))
      << "SIGTERM was not honoured while waiting for the swarm";
  r->Join();
  EXPECT_TRUE(r->result.ok()) << r->result;
}

TEST_F(GossipDaemonStopTest, SigtermOnTheLastReplicaStopsItWithACheckpoint) {
  GossipDaemonOptions d0 = Options("d0", {0});
  d0.expect_members = 3;
  d0.base.listen = "127.0.0.1:0";
  auto founder = Launch(d0);
  ASSERT_NE(founder, nullptr);
  const std::string bootstrap = founder->daemon->gossip_address();
  GossipDaemonOptions a = Options("a", {1});
  a.expect_members = 3;
  a.gossip.join = {bootstrap};
  GossipDaemonOptions b = Options("b", {2});
  b.expect_members = 3;
  b.gossip.join = {bootstrap};
  auto ra = Launch(a);
  auto rb = Launch(b, /*reach=*/3);
  ASSERT_NE(ra, nullptr);
  ASSERT_NE(rb, nullptr);
  ASSERT_TRUE(rb->reached.WaitForNotificationWithTimeout(absl::Seconds(120)));

  // b is the only replica of stage 2: SIGTERM cannot drain it, so it stops
  // with a checkpoint within its stop bound instead of being ignored.
  rb->signals.drain.store(true);
  EXPECT_TRUE(rb->finished.WaitForNotificationWithTimeout(absl::Seconds(60)))
      << "SIGTERM on the last replica was ignored";
  // The others: a stop each; their data node pauses without stage 2 and
  // they end within their own stop bound.
  founder->signals.stop.store(true);
  ra->signals.stop.store(true);
  EXPECT_TRUE(founder->finished.WaitForNotificationWithTimeout(absl::Seconds(60)));
  EXPECT_TRUE(ra->finished.WaitForNotificationWithTimeout(absl::Seconds(60)));
  if (!rb->finished.HasBeenNotified()) rb->signals.stop.store(true);
  rb->Join();
  founder->Join();
  ra->Join();
  EXPECT_TRUE(rb->result.ok()) << rb->result;
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/ckpt-b")) << "no checkpoint written";
  EXPECT_FALSE(std::filesystem::is_empty(dir_ + "/ckpt-b"));
}

}  // namespace
}  // namespace skipswarm::node
