// A joiner that announced its entry and then sends nothing while its
// process answers probes (the chaos soak's joiner restarted under the same
// id, whose state fetch waited out its 60 s at a source that had no
// snapshot): its replicas list it in their averaging from its entry (Note
// [Entry iteration] in node/daemon/gossip/training_members.h). The data
// node must not wait on it: it never routes to an entering member (Note
// [Routed once ready]), its lost micro-batches wait out one MB deadline
// (Note [MB deadline] in node/train/data_node_driver.h), and the replicas
// stuck in the joiner's averaging move on (Note [Sole replica behind] in
// node/daemon/gossip/behind_check.h). d0 (stage 0), a and a2 (stage 1),
// b (stage 2) are GossipDaemons in one process over loopback gRPC (ports
// 0); the joiner's silence is its state request held in
// GossipDaemonOptions::before_state_request for 40 s.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/real_clock.h"
#include "gtest/gtest.h"
#include "node/daemon/gossip/gossip_daemon.h"
#include "tests/integration/running_daemon.h"
#include "tests/integration/tiny_gossip_options.h"

namespace skipswarm::node {
namespace {

class SilentJoinerTest : public TinySwarmFolderTest {
 protected:
  SilentJoinerTest() : TinySwarmFolderTest("silent-joiner") {}

  GossipDaemonOptions Options(const std::string& name, std::vector<int> stages) {
    GossipDaemonOptions o = TinyGossipOptions(name, std::move(stages), corpus_, "silent-joiner");
    o.base.iterations = 1000000;  // stopped by the test
    o.base.model.checkpoint_dir = dir_ + "/ckpt-" + name;
    o.stop_timeout = absl::Seconds(5);
    o.checkpoint_copies = 0;
    return o;
  }

  RunningDaemon* Launch(std::unique_ptr<RunningDaemon> r) {
    RunningDaemon* raw = r.get();
    if (r != nullptr) owned_.push_back(std::move(r));
    return raw;
  }

  // Every daemon still running stops (a failed ASSERT leaves some).
  void TearDown() override {
    release_.Notify();
    for (auto& r : owned_) r->signals.stop.store(true);
    for (auto& r : owned_) r->Join();
  }

  // The longest gap between two of d0's consecutive iteration reports
  // from `from` on.
  absl::Duration LongestGapFrom(size_t from) {
    absl::MutexLock lock(&mu_);
    absl::Duration longest;
    for (size_t i = std::max<size_t>(from, 1); i < stamps_.size(); ++i) {
      longest = std::max(longest, stamps_[i] - stamps_[i - 1]);
    }
    return longest;
  }
  size_t Reports() {
    absl::MutexLock lock(&mu_);
    return stamps_.size();
  }

  std::unique_ptr<common::Clock> clock_ = common::RealClock::Create();
  absl::Mutex mu_;
  std::vector<absl::Duration> stamps_ ABSL_GUARDED_BY(mu_);
  absl::Notification release_;
  std::vector<std::unique_ptr<RunningDaemon>> owned_;
};

// Measured: d0's longest wait 5.0 s (its MB deadline) while the joiner
// was silent; the replicas moved on after ~10 s. The bound is the
// joiner's own stated wait, the state server's 60 s
// (StateServerOptions::max_wait): the data node must never wait that out.
TEST_F(SilentJoinerTest, ASilentJoinerHoldsTheDataNodeNoLongerThanOneDeadline) {
  GossipDaemonOptions d0 = Options("d0", {0});
  d0.observer = [this](const NodeIterationReport&) {
    absl::MutexLock lock(&mu_);
    stamps_.push_back(clock_->SteadyNow());
  };
  RunningDaemon* founder = Launch(LaunchFounder(d0, 4));
  ASSERT_NE(founder, nullptr);
  const std::string bootstrap = founder->daemon->gossip_address();
  GossipDaemonOptions a = Options("a", {1});
  a.expect_members = 4;
  a.gossip.join = {bootstrap};
  RunningDaemon* ra = Launch(LaunchDaemon(a));
  GossipDaemonOptions a2 = Options("a2", {1});
  a2.expect_members = 4;
  a2.gossip.join = {bootstrap};
  ASSERT_NE(Launch(LaunchDaemon(a2)), nullptr);
  GossipDaemonOptions b = Options("b", {2});
  b.expect_members = 4;
  b.gossip.join = {bootstrap};
  RunningDaemon* rb = Launch(LaunchDaemon(b, /*reach=*/5));
  ASSERT_TRUE(ra && rb);
  ASSERT_TRUE(rb->reached.WaitForNotificationWithTimeout(absl::Seconds(180)));
  const size_t from = Reports();
  std::atomic<uint64_t> entry{0};
  std::atomic<int> requests{0};
  GossipDaemonOptions j = Options("j", {1});
  j.gossip.join = {bootstrap};
  j.before_state_request = [&](uint64_t e) {
    if (requests.fetch_add(1) > 0) return;
    entry = e;
    release_.WaitForNotificationWithTimeout(absl::Seconds(40));
  };
  RunningDaemon* joiner = Launch(LaunchDaemon(j, /*reach=*/-1, /*train=*/3));
  ASSERT_NE(joiner, nullptr);
  const absl::Duration t0 = clock_->SteadyNow();
  while (!joiner->trained.WaitForNotificationWithTimeout(absl::Milliseconds(100))) {
    ASSERT_FALSE(joiner->finished.HasBeenNotified()) << joiner->result;
    ASSERT_LT(clock_->SteadyNow() - t0, absl::Seconds(400));
  }
  {
    absl::MutexLock lock(&mu_);
    for (size_t i = std::max<size_t>(from, 1); i < stamps_.size(); ++i) {
      const absl::Duration gap = stamps_[i] - stamps_[i - 1];
      if (gap > absl::Seconds(1)) {
        std::printf("d0 report %zu: gap %.1f s (at %.1f s)\n", i, absl::ToDoubleSeconds(gap),
                    absl::ToDoubleSeconds(stamps_[i] - t0));
      }
    }
  }
  const absl::Duration longest = LongestGapFrom(from);
  std::printf("entry %llu, %d request(s), longest wait %.1f s\n",
              static_cast<unsigned long long>(entry.load()), requests.load(),
              absl::ToDoubleSeconds(longest));
  EXPECT_GT(requests.load(), 0);
  EXPECT_LT(longest, absl::Seconds(60));
  {
    absl::MutexLock lock(&joiner->mu);
    EXPECT_GT(joiner->reports.front().iteration, entry.load()) << "entered at the held entry";
  }
}

}  // namespace
}  // namespace skipswarm::node
