// Note [Restart behind the swarm] (node/daemon/gossip/gossip_daemon_join.cc):
// a replica stops, the swarm trains on without it, and the same node (its
// key, its founder's options, its checkpoint folder) starts again, as a
// service manager restarts a crashed node. It must enter with the swarm's
// state, never be routed to while it stands at its old checkpoint's step.
// GossipDaemons in one process over loopback gRPC (ports 0).
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "tests/integration/running_daemon.h"
#include "tests/integration/tiny_gossip_options.h"
#include "node/daemon/gossip/gossip_daemon.h"

namespace skipswarm::node {
namespace {

class RestartBehindTest : public TinySwarmFolderTest {
 protected:
  RestartBehindTest() : TinySwarmFolderTest("restart-behind") {}

  GossipDaemonOptions Options(const std::string& name, std::vector<int> stages) {
    GossipDaemonOptions o =
        TinyGossipOptions(name, std::move(stages), corpus_, "restart-behind-test");
    o.base.iterations = 1000000;  // stopped by the test
    o.base.checkpoint_every = 2;
    o.base.model.checkpoint_dir = dir_ + "/ckpt-" + name;
    o.stop_timeout = absl::Seconds(10);
    return o;
  }

};

// The micro-batches d0 dropped in (from, until], by iteration and reason,
// for a failure message ("71: stopping_unconfirmed x1; ").
struct Drops {
  int64_t dropped = 0, iterations = 0;
  std::string why;
};
Drops DropsBetween(RunningDaemon& r, int64_t from, int64_t until) {
  Drops d;
  absl::MutexLock lock(&r.mu);
  for (const NodeIterationReport& report : r.reports) {
    const int64_t it = static_cast<int64_t>(report.iteration);
    if (it <= from || it > until || !report.data.has_value()) continue;
    d.dropped += report.data->dropped;
    ++d.iterations;
    if (report.data->dropped == 0) continue;
    absl::StrAppend(&d.why, it, ":");
    for (const auto& [reason, n] : report.data->dropped_by_reason) {
      absl::StrAppend(&d.why, " ", reason, " x", n);
    }
    absl::StrAppend(&d.why, "; ");
  }
  return d;
}

// The first iteration `r` reported at or after `from`; -1: none.
int64_t FirstReportAtOrAfter(RunningDaemon& r, int64_t from) {
  absl::MutexLock lock(&r.mu);
  for (const NodeIterationReport& report : r.reports) {
    if (static_cast<int64_t>(report.iteration) >= from) {
      return static_cast<int64_t>(report.iteration);
    }
  }
  return -1;
}

// Stage 1 has replicas a and a2, stage 2 b and b2; five founders. b stops
// after a few iterations with its checkpoint, and a2 goes too (a swarm
// whose founders are not all live any more); d0 trains on until it is well
// past the stage server's lead; then b starts again from its own disk, as
// a founder by its options. Before: it published stage 2 at iteration 0
// (so b2 waited for its averaging) and waited for five founders that were
// never all live again, until its start-up deadline, when it failed ("the
// swarm did not form"); in the chaos soak a restarted replica hung its
// stage that way. Now it enters like a joiner: it trains again within
// seconds, its first trained iteration is past the swarm's iteration at
// its restart, and d0 drops no micro-batch.
TEST_F(RestartBehindTest, ARestartedReplicaEntersWithTheSwarmsState) {
  const GossipDaemonOptions d0 = Options("d0", {0});
  auto founder = LaunchFounder(d0, /*expect_members=*/5);
  ASSERT_NE(founder, nullptr);
  const std::string bootstrap = founder->daemon->gossip_address();
  auto options = [&](const std::string& name, int stage) {
    GossipDaemonOptions o = Options(name, {stage});
    o.expect_members = 5;
    o.gossip.join = {bootstrap};
    const char seed = name == "a" ? 'A' : name == "a2" ? 'B' : name == "b" ? 'C' : 'D';
    o.gossip.key_file = SaveSeededKey(dir_ + "/" + name + ".key", seed);
    return o;
  };
  auto a = LaunchDaemon(options("a", 1));
  auto a2 = LaunchDaemon(options("a2", 1));
  auto b = LaunchDaemon(options("b", 2), /*reach=*/4);
  auto b2 = LaunchDaemon(options("b2", 2));
  ASSERT_TRUE(a && a2 && b && b2);
  ASSERT_TRUE(b->WaitUnlessFinished(b->reached));
  for (RunningDaemon* r : {b.get(), a2.get()}) {
    r->signals.stop.store(true);
    ASSERT_TRUE(r->finished.WaitForNotificationWithTimeout(absl::Seconds(60)));
    r->Join();
    ASSERT_TRUE(r->result.ok()) << r->result;
  }
  const int64_t stopped_after = b->LastIteration();

  // Well past the stage server's lead (4).
  ASSERT_TRUE(founder->WaitForIteration(stopped_after + 12, absl::Seconds(120)))
      << "d0 did not train on without b";
  const int64_t restarted_at = founder->LastIteration();
  auto again = LaunchDaemon(options("b", 2), /*reach=*/-1, /*train=*/5);
  ASSERT_NE(again, nullptr);
  ASSERT_TRUE(again->WaitUnlessFinished(again->trained))
      << "the restarted replica never trained: " << again->result;
  const int64_t first = FirstReportAtOrAfter(*again, 0);
  EXPECT_GT(first, restarted_at) << "the restarted replica trained an iteration the swarm had "
                                    "passed (it resumed at its checkpoint's step)";
  // Every iteration d0 finished from the restart on: nothing dropped.
  const int64_t until = founder->LastIteration();
  const Drops drops = DropsBetween(*founder, restarted_at, until);
  const int64_t dropped = drops.dropped, iterations = drops.iterations;
  EXPECT_GT(iterations, 0);
  EXPECT_EQ(dropped, 0) << "micro-batches were planned through the restarted replica or lost: "
                        << drops.why;
  for (RunningDaemon* r : {founder.get(), a.get(), b2.get(), again.get()}) {
    r->signals.stop.store(true);
  }
  for (RunningDaemon* r : {founder.get(), a.get(), b2.get(), again.get()}) {
    r->Join();
    EXPECT_TRUE(r->result.ok()) << r->result;
  }
  std::printf("b stopped after iteration %lld, restarted when d0 was at %lld; its first "
              "trained iteration %lld; d0 dropped %lld micro-batches in %lld iterations since\n",
              static_cast<long long>(stopped_after), static_cast<long long>(restarted_at),
              static_cast<long long>(first), static_cast<long long>(dropped),
              static_cast<long long>(iterations));
}

// As above for a member hosting two stages (--host_stages=1+2). Stage 1
// has replicas a (1+2) and p, stage 2 a, q and r; five founders. a stops
// with its checkpoint, and r goes too (not every founder is live again);
// d0 trains on well past the lead with p and q; then a starts again from
// its own disk. Before: the restart rule and the behind check asked only a
// one-stage member's replicas, so a waited as a founder for five founders
// until its start-up deadline ("the swarm did not form"). Now it enters as
// a joiner when a live replica of any of its stages trains without it,
// each stage's state from that stage's replicas (p's, q's) at one entry.
TEST_F(RestartBehindTest, ARestartedTwoStageMemberEntersWithTheSwarmsState) {
  const GossipDaemonOptions d0 = Options("d0", {0});
  auto founder = LaunchFounder(d0, /*expect_members=*/5);
  ASSERT_NE(founder, nullptr);
  const std::string bootstrap = founder->daemon->gossip_address();
  auto options = [&](const std::string& name, std::vector<int> stages) {
    GossipDaemonOptions o = Options(name, std::move(stages));
    o.expect_members = 5;
    o.gossip.join = {bootstrap};
    const char seed = name == "a" ? 'A' : name == "p" ? 'B' : name == "q" ? 'C' : 'D';
    o.gossip.key_file = SaveSeededKey(dir_ + "/" + name + ".key", seed);
    return o;
  };
  auto a = LaunchDaemon(options("a", {1, 2}), /*reach=*/4);
  auto p = LaunchDaemon(options("p", {1}));
  auto q = LaunchDaemon(options("q", {2}));
  auto r = LaunchDaemon(options("r", {2}));
  ASSERT_TRUE(a && p && q && r);
  ASSERT_TRUE(a->WaitUnlessFinished(a->reached));
  for (RunningDaemon* d : {a.get(), r.get()}) {
    d->signals.stop.store(true);
    ASSERT_TRUE(d->finished.WaitForNotificationWithTimeout(absl::Seconds(60)));
    d->Join();
    ASSERT_TRUE(d->result.ok()) << d->result;
  }
  const int64_t stopped_after = a->LastIteration();

  ASSERT_TRUE(founder->WaitForIteration(stopped_after + 12, absl::Seconds(120)))
      << "d0 did not train on without a";
  const int64_t restarted_at = founder->LastIteration();
  auto again = LaunchDaemon(options("a", {1, 2}), /*reach=*/-1, /*train=*/5);
  ASSERT_NE(again, nullptr);
  ASSERT_TRUE(again->WaitUnlessFinished(again->trained))
      << "the restarted two-stage member never trained: " << again->result;
  const int64_t first = FirstReportAtOrAfter(*again, 0);
  EXPECT_GT(first, restarted_at) << "the restarted member trained an iteration the swarm had "
                                    "passed (it resumed at its checkpoint's step)";
  const int64_t until = founder->LastIteration();
  const Drops drops = DropsBetween(*founder, restarted_at, until);
  const int64_t dropped = drops.dropped, iterations = drops.iterations;
  EXPECT_GT(iterations, 0);
  EXPECT_EQ(dropped, 0) << "micro-batches were planned through the restarted member or lost: "
                        << drops.why;
  for (RunningDaemon* d : {founder.get(), p.get(), q.get(), again.get()}) {
    d->signals.stop.store(true);
  }
  for (RunningDaemon* d : {founder.get(), p.get(), q.get(), again.get()}) {
    d->Join();
    EXPECT_TRUE(d->result.ok()) << d->result;
  }
  std::printf("two-stage a stopped after iteration %lld, restarted when d0 was at %lld; its "
              "first trained iteration %lld; d0 dropped %lld micro-batches in %lld iterations "
              "since\n",
              static_cast<long long>(stopped_after), static_cast<long long>(restarted_at),
              static_cast<long long>(first), static_cast<long long>(dropped),
              static_cast<long long>(iterations));
}

// Note [Behind on any stage] (gossip_daemon_join.cc), while training: a
// (1+2) with p (1) and q (2) beside it; four founders. a's trainer stalls
// after an iteration (its observer blocks, as a SIGSTOP or a suspended
// machine stops its training) until d0 is well past the stage server's
// lead: p and q drop a from their averaging and train on. Before: the
// behind check skipped members hosting several stages, so once let go a
// stood in its old iteration (its servers refusing d0's frames, far ahead)
// and never trained again. Now it re-enters as a joiner for both stages,
// each stage's state from p's and q's, and trains past d0's iteration at
// its release.
TEST_F(RestartBehindTest, AStalledTwoStageMemberReentersWithTheSwarmsState) {
  // Checkpoints only at the end: not what this case checks, and the swarm
  // runs thousands of iterations once a is dropped.
  GossipDaemonOptions d0 = Options("d0", {0});
  d0.base.checkpoint_every = 0;
  auto founder = LaunchFounder(d0, /*expect_members=*/4);
  ASSERT_NE(founder, nullptr);
  const std::string bootstrap = founder->daemon->gossip_address();
  auto options = [&](const std::string& name, std::vector<int> stages) {
    GossipDaemonOptions o = Options(name, std::move(stages));
    o.expect_members = 4;
    o.base.checkpoint_every = 0;
    o.gossip.join = {bootstrap};
    const char seed = name == "a" ? 'A' : name == "p" ? 'B' : 'C';
    o.gossip.key_file = SaveSeededKey(dir_ + "/" + name + ".key", seed);
    return o;
  };
  constexpr uint64_t kStallAfter = 4;
  absl::Notification stalled, released;
  std::atomic<bool> once{false};
  GossipDaemonOptions ao = options("a", {1, 2});
  // Its entries (a founder: only its re-entries announce one).
  absl::Mutex entries_mu;
  std::vector<int64_t> entries;
  ao.before_state_request = [&](uint64_t entry) {
    absl::MutexLock lock(&entries_mu);
    entries.push_back(static_cast<int64_t>(entry));
  };
  ao.observer = [&](const NodeIterationReport& report) {
    if (report.iteration < kStallAfter || once.exchange(true)) return;
    stalled.Notify();
    released.WaitForNotification();
  };
  auto a = LaunchDaemon(ao);
  auto p = LaunchDaemon(options("p", {1}));
  auto q = LaunchDaemon(options("q", {2}));
  ASSERT_TRUE(a && p && q);
  ASSERT_TRUE(a->WaitUnlessFinished(stalled)) << a->result;
  const int64_t stalled_at = a->LastIteration();

  const bool passed = founder->WaitForIteration(stalled_at + 12, absl::Seconds(180));
  const int64_t released_at = founder->LastIteration();
  released.Notify();
  ASSERT_TRUE(passed) << "d0 did not train on without a";
  const bool trained = a->WaitForIteration(released_at + 3, absl::Seconds(120));
  const int64_t first = FirstReportAtOrAfter(*a, stalled_at + 1);
  // Its next iterations too (see the check below).
  const bool went_on = trained && a->WaitForIteration(first + 3, absl::Seconds(60));
  for (RunningDaemon* d : {founder.get(), a.get(), p.get(), q.get()}) d->signals.stop.store(true);
  for (RunningDaemon* d : {founder.get(), a.get(), p.get(), q.get()}) d->Join();
  ASSERT_TRUE(trained) << "the stalled two-stage member never trained again (it stood at "
                       << a->LastIteration() << "): " << a->result;
  EXPECT_GT(first, released_at) << "the stalled member trained an iteration the swarm had "
                                   "passed (it went on from its own old state)";
  for (RunningDaemon* d : {founder.get(), p.get(), q.get(), a.get()}) {
    EXPECT_TRUE(d->result.ok()) << d->result;
  }
  // Note [Entry in the group] (node/train/grpc_group_push.cc): with the
  // default entry lead, p's and q's pushes for a's entry come before a's
  // trainer starts it; they are held, and a trains its entry and the
  // iterations after it with p and q. Before, they were refused: p and q
  // averaged without a, which never trained its entry and re-entered a
  // second time after a silent deadline (figures: node/daemon/README.md).
  // One re-entry may announce several entries: a fetch that finds its
  // source already past the entry announces a later one at once (Note [Join
  // retries]: 72 then 74 in one CI run). A second re-entry comes only after
  // a's own averaging waited out a silent deadline (30 s: entries 18 and 88
  // before the fix), so each entry must follow the one before within
  // kRetrySpan iterations, and a must train the last one first.
  constexpr int64_t kRetrySpan = 20;
  {
    absl::MutexLock lock(&entries_mu);
    ASSERT_FALSE(entries.empty()) << "a never announced an entry";
    EXPECT_EQ(entries.back(), first) << "a did not train its entry first";
    for (size_t i = 1; i < entries.size(); ++i) {
      EXPECT_LE(entries[i] - entries[i - 1], kRetrySpan)
          << "a re-entered a second time (entries " << entries[i - 1] << " and " << entries[i]
          << ")";
    }
  }
  EXPECT_TRUE(went_on) << "a did not train 3 iterations after its first (" << first << ")";
  {
    absl::MutexLock lock(&a->mu);
    std::vector<int64_t> after;
    for (const NodeIterationReport& report : a->reports) {
      const int64_t at = static_cast<int64_t>(report.iteration);
      if (at < first || at > first + 3) continue;
      after.push_back(at);
      for (const auto& [stage, step] : report.stages) {
        EXPECT_EQ(step.replicas, 2) << "stage " << stage << " of a's iteration " << at
                                    << " after its re-entry averaged without its replica";
      }
    }
    EXPECT_EQ(after, (std::vector<int64_t>{first, first + 1, first + 2, first + 3}))
        << "a skipped iterations after its re-entry (it re-entered again)";
  }
  std::printf("two-stage a stalled after iteration %lld, let go when d0 was at %lld; its "
              "first trained iteration after the stall %lld\n",
              static_cast<long long>(stalled_at), static_cast<long long>(released_at),
              static_cast<long long>(first));
}

}  // namespace
}  // namespace skipswarm::node
