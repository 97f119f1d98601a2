// Note [Join retries] and Note [Stopping while joining]
// (node/daemon/gossip/gossip_daemon_join.cc): a joiner whose state fetch
// fails tries again (another replica, a peer's copy, or the same source a
// little later) instead of giving up, and a stop signal while it joins ends
// it at once, exit OK, with no checkpoint written over what its directory
// holds. GossipDaemons in one process over loopback gRPC (ports 0); the
// fault is the source's state server refusing its first transfers
// (GossipDaemonOptions::fail_first_state_transfers).
#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/real_clock.h"
#include "gtest/gtest.h"
#include "node/daemon/gossip/gossip_daemon.h"
#include "tests/integration/running_daemon.h"
#include "tests/integration/tiny_gossip_options.h"

namespace skipswarm::node {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class JoinRetryTest : public TinySwarmFolderTest {
 protected:
  JoinRetryTest() : TinySwarmFolderTest("join-retry") {}

  GossipDaemonOptions Options(const std::string& name, std::vector<int> stages,
                              int64_t iterations) {
    GossipDaemonOptions o = TinyGossipOptions(name, std::move(stages), corpus_, "join-retry-test");
    o.base.iterations = iterations;
    o.base.model.checkpoint_dir = dir_ + "/ckpt-" + name;
    o.stop_timeout = absl::Seconds(5);
    o.checkpoint_copies = 0;  // no peer copies: a live replica is the only source
    return o;
  }

  // The fixture owns it; TearDown stops it.
  RunningDaemon* Launch(GossipDaemonOptions o, int64_t reach = -1, size_t train = 0) {
    std::unique_ptr<RunningDaemon> r = LaunchDaemon(std::move(o), reach, train);
    RunningDaemon* raw = r.get();
    if (r != nullptr) owned_.push_back(std::move(r));
    return raw;
  }

  // Every daemon still running stops (a failed ASSERT leaves some).
  void TearDown() override {
    for (auto& r : owned_) r->signals.stop.store(true);
    for (auto& r : owned_) r->Join();
  }

  // d0 (stage 0, the data node), a (stage 1) and b (stage 2), founders;
  // b's state server refuses its first `b_refuses` transfers.
  void Found(int64_t iterations, int b_refuses) {
    GossipDaemonOptions d0 = Options("d0", {0}, iterations);
    d0.expect_members = 3;
    d0.base.listen = "127.0.0.1:0";
    founder_ = Launch(d0);
    ASSERT_NE(founder_, nullptr);
    bootstrap_ = founder_->daemon->gossip_address();
    GossipDaemonOptions a = Options("a", {1}, iterations);
    a.expect_members = 3;
    a.gossip.join = {bootstrap_};
    a_ = Launch(a);
    GossipDaemonOptions b = Options("b", {2}, iterations);
    b.expect_members = 3;
    b.gossip.join = {bootstrap_};
    b.fail_first_state_transfers = b_refuses;
    b_ = Launch(b, /*reach=*/2);
    ASSERT_TRUE(a_ && b_);
  }

  void StopAll() { TearDown(); }

  std::string bootstrap_;
  RunningDaemon* founder_ = nullptr;
  RunningDaemon* a_ = nullptr;
  RunningDaemon* b_ = nullptr;
  std::vector<std::unique_ptr<RunningDaemon>> owned_;
};

// Stage 2's only replica refuses the joiner's first fetch outright (3
// calls: the first try and the two resumes of one source). Before, the
// joiner gave up at once: Run returned UNAVAILABLE "no replica delivered
// stage 2 at iteration E" (the chaos soak's replacements failed that way
// when their only source died). Now it backs off, asks again and enters
// with the replica's state on a later round.
TEST_F(JoinRetryTest, AJoinerWhoseFirstFetchFailsTriesAgainAndEnters) {
  constexpr int64_t kIterations = 1000000;  // stopped by the test
  Found(kIterations, /*b_refuses=*/3);
  ASSERT_TRUE(b_->reached.WaitForNotificationWithTimeout(absl::Seconds(180)));
  GossipDaemonOptions j = Options("j", {2}, kIterations);
  j.gossip.join = {bootstrap_};
  RunningDaemon* joiner = Launch(j, /*reach=*/-1, /*train=*/5);
  ASSERT_NE(joiner, nullptr);
  // Before, Run returned at its first failed fetch without training.
  while (!joiner->trained.WaitForNotificationWithTimeout(absl::Milliseconds(100))) {
    ASSERT_FALSE(joiner->finished.HasBeenNotified()) << "the joiner ended: " << joiner->result;
  }
  joiner->signals.stop.store(true);
  ASSERT_TRUE(joiner->finished.WaitForNotificationWithTimeout(absl::Seconds(60)));
  joiner->Join();
  EXPECT_TRUE(joiner->result.ok()) << joiner->result;
  {
    absl::MutexLock lock(&joiner->mu);
    // It trained stage 2 with b: the replicas' digests agreed.
    for (const NodeIterationReport& r : joiner->reports) {
      auto s = r.stages.find(2);
      ASSERT_NE(s, r.stages.end());
      EXPECT_TRUE(s->second.digests_agree) << "iteration " << r.iteration;
    }
    std::printf("the joiner entered stage 2 at iteration %llu after its first fetch failed\n",
                static_cast<unsigned long long>(joiner->reports.front().iteration));
  }
  StopAll();
  EXPECT_TRUE(founder_->result.ok()) << founder_->result;
}

// Note [Routed once ready] (node/daemon/gossip/training_members.h): the
// joiner's first state request is held until the data node and the source
// have both finished the iteration before its announced entry: the
// boundary passed, the source serves it from its state while its update
// of the entry has not run (Note [Snapshot in the iteration]), and
// otherwise refuses it and the joiner announces a later entry. Before, the
// data node, which held the first entry when it planned
// that iteration, routed one of its micro-batches through the joiner, which
// never took it (it skipped that iteration): the micro-batch was dropped
// (run S16 of tests/netns/README.md, "entry race"). Now no member routes
// to a joiner before its record says its state is loaded: nothing dropped.
TEST_F(JoinRetryTest, AJoinerWhoseStateComesLateIsNeverRoutedBeforeIt) {
  constexpr int64_t kIterations = 1000000;  // stopped by the test
  Found(kIterations, /*b_refuses=*/0);
  ASSERT_TRUE(b_->reached.WaitForNotificationWithTimeout(absl::Seconds(180)));
  GossipDaemonOptions j = Options("j", {2}, kIterations);
  j.gossip.join = {bootstrap_};
  std::atomic<int> requests{0};
  std::atomic<uint64_t> first_entry{0};
  std::atomic<bool> held{false};
  RunningDaemon* d0 = founder_;
  RunningDaemon* b = b_;
  j.before_state_request = [&](uint64_t entry) {
    if (requests.fetch_add(1) > 0) return;
    first_entry = entry;
    // Both have passed boundary `entry`: the data node planned iteration
    // `entry` with the view it held (our entry), the source took its
    // snapshot without our request.
    for (RunningDaemon* r : {d0, b}) {
      auto finished_before_entry = [r, entry]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(r->mu) {
        return !r->reports.empty() && r->reports.back().iteration + 1 >= entry;
      };
      if (!r->mu.LockWhenWithTimeout(absl::Condition(&finished_before_entry),
                                     absl::Seconds(120))) {
        r->mu.Unlock();
        return;
      }
      r->mu.Unlock();
    }
    held = true;
  };
  RunningDaemon* joiner = Launch(j, /*reach=*/-1, /*train=*/5);
  ASSERT_NE(joiner, nullptr);
  while (!joiner->trained.WaitForNotificationWithTimeout(absl::Milliseconds(100))) {
    ASSERT_FALSE(joiner->finished.HasBeenNotified()) << "the joiner ended: " << joiner->result;
  }
  ASSERT_TRUE(held) << "the data node or the source did not reach the entry";
  uint64_t entered = 0;
  {
    absl::MutexLock lock(&joiner->mu);
    entered = joiner->reports.front().iteration;
  }
  // The scenario happened: the request came after both passed boundary
  // `entry`. The source, still in that iteration (its update waits for
  // our averaging), serves it from its state (Note [Snapshot in the
  // iteration] in state_transfer.h) and we enter at `entry`; had its
  // update run, it would refuse and we would announce a later entry.
  if (requests.load() == 1) {
    EXPECT_EQ(entered, first_entry.load());
  } else {
    EXPECT_GT(entered, first_entry.load());
  }
  // Counted before the stop: StopAll stops the members one by one while the
  // data node still trains, so its last iteration may lose a micro-batch to
  // a member that already left (a stop, not the entry this case is about).
  int dropped = 0;
  {
    absl::MutexLock lock(&founder_->mu);
    for (const NodeIterationReport& r : founder_->reports) dropped += r.data ? r.data->dropped : 0;
  }
  StopAll();
  EXPECT_TRUE(founder_->result.ok()) << founder_->result;
  EXPECT_EQ(dropped, 0) << "micro-batches routed to the joiner before its entry "
                        << first_entry.load();
  std::printf("first entry %llu requested late, entered at %llu after %d request(s); %d "
              "micro-batches dropped\n",
              static_cast<unsigned long long>(first_entry.load()),
              static_cast<unsigned long long>(entered), requests.load(), dropped);
}

// Stage 2's only replica stops, so the joiner for stage 2 finds no source
// (and, without copies, never will) and waits; a SIGTERM then ends the join
// at once: Run returns OK, no checkpoint is written, and the stage file a
// previous run left in its directory is untouched. Before, the joiner
// ignored the signal until its start-up deadline (60 s here) and then
// failed.
TEST_F(JoinRetryTest, ASigtermWhileJoiningEndsAtOnceWithoutACheckpoint) {
  Found(/*iterations=*/1000000, /*b_refuses=*/0);
  ASSERT_TRUE(b_->reached.WaitForNotificationWithTimeout(absl::Seconds(180)));
  b_->signals.stop.store(true);
  ASSERT_TRUE(b_->finished.WaitForNotificationWithTimeout(absl::Seconds(60)));
  GossipDaemonOptions j = Options("j", {2}, 1000000);
  j.gossip.join = {bootstrap_};
  const std::string ckpt_dir = dir_ + "/ckpt-j";
  std::filesystem::create_directories(ckpt_dir);
  const std::string previous = ckpt_dir + "/j-stage-2.ckpt";
  { std::ofstream(previous, std::ios::binary) << "a previous run's stage file"; }
  RunningDaemon* joiner = Launch(j);
  ASSERT_NE(joiner, nullptr);
  auto clock = common::RealClock::Create();
  const absl::Duration t0 = clock->SteadyNow();
  joiner->signals.drain.store(true);  // SIGTERM
  const bool ended = joiner->finished.WaitForNotificationWithTimeout(absl::Seconds(15));
  EXPECT_TRUE(ended) << "SIGTERM was not honoured while joining";
  joiner->Join();
  const double took = absl::ToDoubleSeconds(clock->SteadyNow() - t0);
  EXPECT_TRUE(joiner->result.ok()) << joiner->result;
  EXPECT_EQ(ReadAll(previous), "a previous run's stage file") << "the stop overwrote it";
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(ckpt_dir)) {
    files += e.is_regular_file() ? 1 : 0;
  }
  EXPECT_EQ(files, 1) << "a stop while joining wrote a checkpoint";
  {
    absl::MutexLock lock(&joiner->mu);
    EXPECT_TRUE(joiner->reports.empty()) << "it trained after the stop";
  }
  std::printf("SIGTERM while joining: exited in %.2f s, no checkpoint written\n", took);
  StopAll();
}

}  // namespace
}  // namespace skipswarm::node
