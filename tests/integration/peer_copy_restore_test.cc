// Note [Restore from peer copies] (node/daemon/gossip/gossip_daemon_restore.cc):
// in a plain gossip swarm (no launcher), stage 2's only replica stops, the
// data node pauses, and a joiner that is to host stage 2 restores it from
// the newest checkpoint copy its peers hold (Note [Checkpoint copies]);
// training resumes at the paused iteration and every node finishes; and a
// member hosting two stages, one of them orphaned, restores that one and
// fetches the other at the same entry; a member restarted with its disk
// keeps its own state of the orphaned stage when it is newer than every
// copy (Note [Newest state wins]); and a restarted member whose only stage
// is orphaned restores it from a copy instead of forming as a founder, or,
// with no copy, fails naming the stage while the data node stays paused.
// GossipDaemons in one process over loopback gRPC (ports 0).
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "httplib.h"
#include "common/atomic_file.h"
#include "gtest/gtest.h"
#include "tests/integration/running_daemon.h"
#include "tests/integration/tiny_gossip_options.h"
#include "node/daemon/gossip/gossip_daemon.h"
#include "model/checkpoint.h"

namespace skipswarm::node {
namespace {

class PeerCopyRestoreTest : public TinySwarmFolderTest {
 protected:
  PeerCopyRestoreTest() : TinySwarmFolderTest("peer-copy-restore") {}

  GossipDaemonOptions Options(const std::string& name, std::vector<int> stages) {
    GossipDaemonOptions o =
        TinyGossipOptions(name, std::move(stages), corpus_, "peer-copy-restore-test");
    o.base.iterations = kIterations;
    o.base.checkpoint_every = 4;  // copies of every stage at 4, 8, 12, ...
    o.base.model.checkpoint_dir = dir_ + "/ckpt-" + name;
    o.stop_timeout = absl::Seconds(5);
    return o;
  }

  // Every iteration d0 finished trained (micro-batches finished, a finite
  // loss): none ran empty while paused, and the paused one was re-run.
  // A failure names the drops by cause: "stopping_unconfirmed" is a
  // relayed refusal of the lost replica's that the data node could not
  // confirm from its record (Note [Confirmed stopping]), which should have
  // been re-run.
  static void ExpectEveryIterationTrained(RunningDaemon& d0) {
    absl::MutexLock lock(&d0.mu);
    ASSERT_EQ(d0.reports.size(), static_cast<size_t>(kIterations));
    for (const NodeIterationReport& r : d0.reports) {
      ASSERT_TRUE(r.data.has_value());
      std::string drops;
      for (const auto& [reason, n] : r.data->dropped_by_reason) {
        absl::StrAppend(&drops, " ", reason, "=", n);
      }
      const std::string what = absl::StrCat("iteration ", r.iteration, ": ", r.data->completed,
                                            " completed, ", r.data->dropped, " dropped (", drops,
                                            " ), ", r.data->rerun, " re-run, status ",
                                            r.data->status.ToString());
      EXPECT_GT(r.data->completed, 0) << what;
      EXPECT_TRUE(std::isfinite(r.data->loss)) << what;
    }
  }

  // Note [Restored step]: the final checkpoints (node name, stage) are one
  // set, every stage at step kIterations (what `skipswarm eval` and a
  // resume check).
  void ExpectFinalCheckpointsAtTheEnd(const std::vector<std::pair<std::string, int>>& finals) {
    for (const auto& [name, stage] : finals) {
      const std::string path =
          dir_ + "/ckpt-" + name + "/" + name + "-stage-" + std::to_string(stage) + ".ckpt";
      absl::StatusOr<std::string> bytes = common::ReadFileBytes(path);
      ASSERT_TRUE(bytes.ok()) << bytes.status();
      absl::StatusOr<model::CheckpointInfo> info = model::ReadCheckpointInfo(*bytes);
      ASSERT_TRUE(info.ok()) << info.status();
      EXPECT_EQ(info->stage, stage);
      EXPECT_EQ(info->step, kIterations) << name << "'s checkpoint of stage " << stage;
    }
  }

  // A counter on `d`'s /metrics (-1 when it is not there).
  static double Counter(RunningDaemon& d, const std::string& name) {
    httplib::Client http("127.0.0.1", d.daemon->metrics_port());
    auto res = http.Get("/metrics");
    if (!res) return -1;
    const std::string key = "\n" + name + " ";
    const size_t at = res->body.find(key);
    if (at == std::string::npos) return -1;
    return std::stod(res->body.substr(at + key.size()));
  }

  // The step of `name`'s own checkpoint of `stage` (-1 when unreadable).
  int64_t CheckpointStep(const std::string& name, int stage) {
    absl::StatusOr<std::string> bytes = common::ReadFileBytes(
        dir_ + "/ckpt-" + name + "/" + name + "-stage-" + std::to_string(stage) + ".ckpt");
    if (!bytes.ok()) return -1;
    absl::StatusOr<model::CheckpointInfo> info = model::ReadCheckpointInfo(*bytes);
    return info.ok() ? info->step : -1;
  }

  static constexpr int64_t kIterations = 40;
};

TEST_F(PeerCopyRestoreTest, AJoinerRestoresAStageWithoutReplicaFromAPeersCopy) {
  const GossipDaemonOptions d0 = Options("d0", {0});
  auto founder = LaunchFounder(d0, /*expect_members=*/3);
  ASSERT_NE(founder, nullptr);
  const std::string bootstrap = founder->daemon->gossip_address();
  auto member = [&](const std::string& name, int stage, int64_t reach = -1) {
    GossipDaemonOptions o = Options(name, {stage});
    o.expect_members = 3;
    o.gossip.join = {bootstrap};
    return LaunchDaemon(o, reach);
  };
  auto a = member("a", 1);
  auto b = member("b", 2, /*reach=*/13);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(b->reached.WaitForNotificationWithTimeout(absl::Seconds(180)));
  // Stage 2 goes (its disk with it: the joiner has its own, empty one).
  b->signals.stop.store(true);
  ASSERT_TRUE(b->finished.WaitForNotificationWithTimeout(absl::Seconds(60)));
  b->Join();
  EXPECT_TRUE(b->result.ok()) << b->result;
  int64_t b_last;
  {
    absl::MutexLock lock(&b->mu);
    b_last = static_cast<int64_t>(b->reports.back().iteration);
  }
  // Before: the joiner waited for a live replica of stage 2 until its
  // start-up deadline and failed ("no replica of stage 2 answers").
  GossipDaemonOptions j = Options("j", {2});
  j.gossip.join = {bootstrap};
  auto joiner = LaunchDaemon(j);
  ASSERT_NE(joiner, nullptr);
  ASSERT_TRUE(joiner->finished.WaitForNotificationWithTimeout(absl::Seconds(240)));
  joiner->Join();
  EXPECT_TRUE(joiner->result.ok()) << joiner->result;
  ASSERT_TRUE(founder->finished.WaitForNotificationWithTimeout(absl::Seconds(120)));
  founder->Join();
  a->signals.stop.store(true);
  a->Join();
  EXPECT_TRUE(founder->result.ok()) << founder->result;
  int64_t entry = -1;
  {
    absl::MutexLock lock(&joiner->mu);
    ASSERT_FALSE(joiner->reports.empty());
    // It entered at the iteration the swarm paused in, right after b's
    // exit iteration (b's last report, or the one after it that b finished
    // while stopping).
    entry = static_cast<int64_t>(joiner->reports.front().iteration);
    EXPECT_GT(entry, b_last);
    EXPECT_LE(entry, b_last + 2);
    EXPECT_EQ(static_cast<int64_t>(joiner->reports.back().iteration), kIterations - 1);
  }
  ExpectEveryIterationTrained(*founder);
  std::printf("stage 2 lost after iteration %lld; the joiner restored it from a peer's copy and "
              "entered at %lld\n",
              static_cast<long long>(b_last), static_cast<long long>(entry));
  // Note [Restored step]: the final checkpoints are one set, every stage at
  // step 40 (what `skipswarm eval` and a resume check). Before, the joiner's
  // stage 2 kept the copy's lag (step 36 in a run that restored the copy of
  // 12 at entry 16) and eval refused the set.
  ExpectFinalCheckpointsAtTheEnd({{"d0", 0}, {"a", 1}, {"j", 2}});
}

// A member hosting two stages, one of them orphaned: a (1+2) is stage 2's
// only replica, p (1) stage 1's other; three founders. a stops after a few
// iterations, its disk with it (its checkpoints and its key: it comes
// back under a new node id), so stage 2 has no live replica and d0
// pauses; then a starts again on its founder's options. Before: its restart rule asked no replica while a
// stage of it had none, so it waited as a founder until its start-up
// deadline ("the swarm did not form"), and as a joiner the restore from
// peers' copies was for one-stage members only. Now it enters as a joiner
// for both stages at the paused iteration: stage 2 from the newest copy
// its peers hold (advanced to the entry), stage 1 from p's state of that
// boundary (Note [Snapshot in the iteration]); d0 re-runs the paused
// iteration and every node finishes.
TEST_F(PeerCopyRestoreTest, ATwoStageMemberRestoresItsOrphanedStageAndFetchesTheOther) {
  const GossipDaemonOptions d0 = Options("d0", {0});
  auto founder = LaunchFounder(d0, /*expect_members=*/3);
  ASSERT_NE(founder, nullptr);
  const std::string bootstrap = founder->daemon->gossip_address();
  auto options = [&](const std::string& name, std::vector<int> stages) {
    GossipDaemonOptions o = Options(name, std::move(stages));
    o.expect_members = 3;
    o.gossip.join = {bootstrap};
    return o;
  };
  auto a = LaunchDaemon(options("a", {1, 2}), /*reach=*/13);
  auto p = LaunchDaemon(options("p", {1}));
  ASSERT_TRUE(a && p);
  ASSERT_TRUE(a->WaitUnlessFinished(a->reached)) << a->result;
  a->signals.stop.store(true);
  ASSERT_TRUE(a->finished.WaitForNotificationWithTimeout(absl::Seconds(60)));
  a->Join();
  EXPECT_TRUE(a->result.ok()) << a->result;
  const int64_t a_last = a->LastIteration();
  std::filesystem::remove_all(dir_ + "/ckpt-a");  // its disk goes with it

  auto again = LaunchDaemon(options("a", {1, 2}));
  ASSERT_NE(again, nullptr);
  ASSERT_TRUE(again->finished.WaitForNotificationWithTimeout(absl::Seconds(240)));
  again->Join();
  EXPECT_TRUE(again->result.ok()) << again->result;
  ASSERT_TRUE(founder->finished.WaitForNotificationWithTimeout(absl::Seconds(120)));
  founder->Join();
  p->signals.stop.store(true);
  p->Join();
  EXPECT_TRUE(founder->result.ok()) << founder->result;
  int64_t entry = -1;
  {
    absl::MutexLock lock(&again->mu);
    ASSERT_FALSE(again->reports.empty());
    // The iteration the swarm paused in, right after a's exit iteration.
    entry = static_cast<int64_t>(again->reports.front().iteration);
    EXPECT_GT(entry, a_last);
    EXPECT_LE(entry, a_last + 2);
    EXPECT_EQ(static_cast<int64_t>(again->reports.back().iteration), kIterations - 1);
  }
  ExpectEveryIterationTrained(*founder);
  std::printf("two-stage a stopped after iteration %lld with stage 2's only replica; restarted "
              "without its disk, it restored stage 2 from a peer's copy, fetched stage 1 from p "
              "and entered at %lld\n",
              static_cast<long long>(a_last), static_cast<long long>(entry));
  ExpectFinalCheckpointsAtTheEnd({{"d0", 0}, {"p", 1}, {"a", 1}, {"a", 2}});
}

// Note [Newest state wins] (node/daemon/gossip/orphan_restore.h): a member
// restarted WITH its disk whose own state of an orphaned stage is newer
// than every copy its peers hold. a (1+2) and q (2) host stage 2, p stage
// 1; checkpoints (and so copies) every 10 iterations. a leaves after 12
// (its final checkpoint is of the iteration it left at, past 10), then q
// leaves after 16: stage 2 has no live replica and the swarm pauses, the newest
// copy of stage 2 being that of 10. a restarts on its founder's options
// with its disk, finds p ahead and enters as a joiner. Before, the restore
// took the copy of 10 and threw away the updates a had on disk (counted
// lost); now a keeps its own state of stage 2, advanced to the entry, and
// fetches stage 1 from p.
TEST_F(PeerCopyRestoreTest, ARestartedMemberKeepsItsOwnStateWhenNewerThanEveryCopy) {
  auto options = [&](const std::string& name, std::vector<int> stages) {
    GossipDaemonOptions o = Options(name, std::move(stages));
    o.base.checkpoint_every = 10;
    o.base.metrics_port = 0;
    return o;
  };
  // d0 holds the swarm at two boundaries (its observer runs before its
  // next iteration starts) while the test asks a, then q, to leave, so
  // both leave before the boundary of 20 and its copies.
  absl::Notification at_12, go_12, at_16, go_16;
  GossipDaemonOptions d0 = options("d0", {0});
  d0.observer = [&](const NodeIterationReport& r) {
    if (r.iteration == 12) {
      at_12.Notify();
      go_12.WaitForNotificationWithTimeout(absl::Seconds(120));
    } else if (r.iteration == 16) {
      at_16.Notify();
      go_16.WaitForNotificationWithTimeout(absl::Seconds(120));
    }
  };
  auto founder = LaunchFounder(d0, /*expect_members=*/4);
  ASSERT_NE(founder, nullptr);
  const std::string bootstrap = founder->daemon->gossip_address();
  auto member = [&](const std::string& name, std::vector<int> stages) {
    GossipDaemonOptions o = options(name, std::move(stages));
    o.expect_members = 4;
    o.gossip.join = {bootstrap};
    return o;
  };
  auto a = LaunchDaemon(member("a", {1, 2}));
  auto q = LaunchDaemon(member("q", {2}));
  auto p = LaunchDaemon(member("p", {1}));
  ASSERT_TRUE(a && q && p);
  ASSERT_TRUE(founder->WaitUnlessFinished(at_12)) << founder->result;
  EXPECT_TRUE(a->daemon->RequestDrain(/*force=*/false).ok());
  go_12.Notify();
  ASSERT_TRUE(a->finished.WaitForNotificationWithTimeout(absl::Seconds(60)));
  a->Join();
  EXPECT_TRUE(a->result.ok()) << a->result;
  ASSERT_TRUE(founder->WaitUnlessFinished(at_16)) << founder->result;
  // q is stage 2's last replica now: it leaves anyway.
  EXPECT_TRUE(q->daemon->RequestDrain(/*force=*/true).ok());
  go_16.Notify();
  ASSERT_TRUE(q->finished.WaitForNotificationWithTimeout(absl::Seconds(60)));
  q->Join();
  EXPECT_TRUE(q->result.ok()) << q->result;
  const int64_t q_last = q->LastIteration();
  // Gone for good: a stopped daemon's servers would still answer probes.
  a.reset();
  q.reset();
  const int64_t own = CheckpointStep("a", 2);
  // The newest copy of stage 2 is that of 10: 20 never came.
  ASSERT_GT(own, 10) << "a's final checkpoint is no newer than the copy";
  ASSERT_LT(q_last, 19);
  ASSERT_GT(q_last + 1, own) << "the swarm paused no later than a's own state";

  auto again = LaunchDaemon(member("a", {1, 2}));
  ASSERT_NE(again, nullptr);
  ASSERT_TRUE(again->finished.WaitForNotificationWithTimeout(absl::Seconds(240)));
  again->Join();
  EXPECT_TRUE(again->result.ok()) << again->result;
  ASSERT_TRUE(founder->finished.WaitForNotificationWithTimeout(absl::Seconds(120)));
  founder->Join();
  p->signals.stop.store(true);
  p->Join();
  EXPECT_TRUE(founder->result.ok()) << founder->result;
  int64_t entry = -1;
  {
    absl::MutexLock lock(&again->mu);
    ASSERT_FALSE(again->reports.empty());
    entry = static_cast<int64_t>(again->reports.front().iteration);
    EXPECT_GT(entry, own);
    EXPECT_EQ(static_cast<int64_t>(again->reports.back().iteration), kIterations - 1);
  }
  EXPECT_EQ(Counter(*again, "skipswarm_stage_restores_total"), 1);
  // Before: entry - 10 (the copy replaced the newer own state).
  EXPECT_EQ(Counter(*again, "skipswarm_stage_restore_lost_iterations_total"),
            static_cast<double>(entry - own))
      << "own state at " << own << ", newest copy at 10, entry " << entry;
  ExpectEveryIterationTrained(*founder);
  std::printf("a left with its own stage 2 at step %lld, q after iteration %lld (newest copy "
              "10); a restarted with its disk, entered at %lld and lost %lld iterations\n",
              static_cast<long long>(own), static_cast<long long>(q_last),
              static_cast<long long>(entry), static_cast<long long>(entry - own));
  ExpectFinalCheckpointsAtTheEnd({{"d0", 0}, {"p", 1}, {"a", 1}, {"a", 2}});
}

// A restarted member all of whose stages are orphaned: b, stage 2's only
// replica, stops (the swarm pauses) and starts again on its founder's
// options without its disk. Before, with no replica of its stage to ask
// it never found the swarm training without it and stayed a founder
// (the founders' records still say iteration 0); now it asks the other
// stages' replicas, enters as a joiner and restores stage 2 from the
// newest copy its peers hold, at the paused iteration.
TEST_F(PeerCopyRestoreTest, ARestartedMemberWhoseEveryStageIsOrphanedRestoresFromCopies) {
  auto options = [&](const std::string& name, std::vector<int> stages) {
    GossipDaemonOptions o = Options(name, std::move(stages));
    o.base.metrics_port = 0;
    return o;
  };
  auto founder = LaunchFounder(options("d0", {0}), /*expect_members=*/3);
  ASSERT_NE(founder, nullptr);
  const std::string bootstrap = founder->daemon->gossip_address();
  auto member = [&](const std::string& name, std::vector<int> stages) {
    GossipDaemonOptions o = options(name, std::move(stages));
    o.expect_members = 3;
    o.gossip.join = {bootstrap};
    return o;
  };
  auto a = LaunchDaemon(member("a", {1}));
  auto b = LaunchDaemon(member("b", {2}), /*reach=*/13);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(b->WaitUnlessFinished(b->reached)) << b->result;
  b->signals.stop.store(true);
  ASSERT_TRUE(b->finished.WaitForNotificationWithTimeout(absl::Seconds(60)));
  b->Join();
  EXPECT_TRUE(b->result.ok()) << b->result;
  const int64_t b_last = b->LastIteration();
  b.reset();
  std::filesystem::remove_all(dir_ + "/ckpt-b");  // its disk goes with it

  auto again = LaunchDaemon(member("b", {2}));
  ASSERT_NE(again, nullptr);
  ASSERT_TRUE(again->finished.WaitForNotificationWithTimeout(absl::Seconds(240)));
  again->Join();
  EXPECT_TRUE(again->result.ok()) << again->result;
  ASSERT_TRUE(founder->finished.WaitForNotificationWithTimeout(absl::Seconds(120)));
  founder->Join();
  a->signals.stop.store(true);
  a->Join();
  EXPECT_TRUE(founder->result.ok()) << founder->result;
  int64_t entry = -1;
  {
    absl::MutexLock lock(&again->mu);
    ASSERT_FALSE(again->reports.empty());
    entry = static_cast<int64_t>(again->reports.front().iteration);
    EXPECT_GT(entry, b_last);
    EXPECT_LE(entry, b_last + 2);
    EXPECT_EQ(static_cast<int64_t>(again->reports.back().iteration), kIterations - 1);
  }
  EXPECT_EQ(Counter(*again, "skipswarm_stage_restores_total"), 1);
  ExpectEveryIterationTrained(*founder);
  std::printf("b, stage 2's only replica, stopped after iteration %lld; restarted without its "
              "disk, it restored stage 2 from a peer's copy and entered at %lld\n",
              static_cast<long long>(b_last), static_cast<long long>(entry));
  ExpectFinalCheckpointsAtTheEnd({{"d0", 0}, {"a", 1}, {"b", 2}});
}

// The same restart with no copy anywhere (copies off) and no disk: nothing
// to restore stage 2 from. b fails at its start-up deadline naming the
// stage, and d0 stays paused: no iteration runs empty. Before, b formed as
// a founder at iteration 0 and d0 ran the rest of its iterations empty.
TEST_F(PeerCopyRestoreTest, ARestartedMemberWithNoStateOfItsOrphanedStageFailsNamingIt) {
  auto options = [&](const std::string& name, std::vector<int> stages) {
    GossipDaemonOptions o = Options(name, std::move(stages));
    o.checkpoint_copies = 0;
    return o;
  };
  auto founder = LaunchFounder(options("d0", {0}), /*expect_members=*/3);
  ASSERT_NE(founder, nullptr);
  const std::string bootstrap = founder->daemon->gossip_address();
  auto member = [&](const std::string& name, std::vector<int> stages) {
    GossipDaemonOptions o = options(name, std::move(stages));
    o.expect_members = 3;
    o.gossip.join = {bootstrap};
    return o;
  };
  auto a = LaunchDaemon(member("a", {1}));
  auto b = LaunchDaemon(member("b", {2}), /*reach=*/13);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(b->WaitUnlessFinished(b->reached)) << b->result;
  b->signals.stop.store(true);
  ASSERT_TRUE(b->finished.WaitForNotificationWithTimeout(absl::Seconds(60)));
  b->Join();
  EXPECT_TRUE(b->result.ok()) << b->result;
  const int64_t b_last = b->LastIteration();
  b.reset();
  std::filesystem::remove_all(dir_ + "/ckpt-b");

  GossipDaemonOptions o = member("b", {2});
  o.base.startup_timeout = absl::Seconds(8);
  auto again = LaunchDaemon(o);
  ASSERT_NE(again, nullptr);
  ASSERT_TRUE(again->finished.WaitForNotificationWithTimeout(absl::Seconds(120)));
  again->Join();
  EXPECT_TRUE(absl::IsUnavailable(again->result)) << again->result;
  EXPECT_NE(again->result.message().find("stage 2 has no live replica"), std::string::npos)
      << again->result;
  {
    absl::MutexLock lock(&again->mu);
    EXPECT_TRUE(again->reports.empty());
  }
  founder->signals.stop.store(true);
  a->signals.stop.store(true);
  founder->Join();
  a->Join();
  absl::MutexLock lock(&founder->mu);
  for (const NodeIterationReport& r : founder->reports) {
    ASSERT_TRUE(r.data.has_value());
    EXPECT_GT(r.data->completed, 0) << "iteration " << r.iteration << " ran empty";
  }
  EXPECT_LE(static_cast<int64_t>(founder->reports.back().iteration), b_last + 1);
  std::printf("b stopped after iteration %lld; restarted without disk or copies, it failed: %s\n",
              static_cast<long long>(b_last), again->result.ToString().c_str());
}

// The data node as the member whose every stage is orphaned: d0, the only
// data node, stops and restarts without its disk; it restores stage 0 from
// a peer's copy and training resumes where the swarm waited.
TEST_F(PeerCopyRestoreTest, ARestartedSoleDataNodeRestoresStageZeroFromACopy) {
  auto options = [&](const std::string& name, std::vector<int> stages) {
    GossipDaemonOptions o = Options(name, std::move(stages));
    o.base.metrics_port = 0;
    return o;
  };
  auto founder = LaunchFounder(options("a", {1}), /*expect_members=*/3);
  ASSERT_NE(founder, nullptr);
  const std::string bootstrap = founder->daemon->gossip_address();
  auto member = [&](const std::string& name, std::vector<int> stages) {
    GossipDaemonOptions o = options(name, std::move(stages));
    o.expect_members = 3;
    o.gossip.join = {bootstrap};
    return o;
  };
  auto d0 = LaunchDaemon(member("d0", {0}), /*reach=*/13);
  auto b = LaunchDaemon(member("b", {2}));
  ASSERT_TRUE(d0 && b);
  ASSERT_TRUE(d0->WaitUnlessFinished(d0->reached)) << d0->result;
  d0->signals.stop.store(true);
  ASSERT_TRUE(d0->finished.WaitForNotificationWithTimeout(absl::Seconds(60)));
  d0->Join();
  EXPECT_TRUE(d0->result.ok()) << d0->result;
  const int64_t d0_last = d0->LastIteration();
  d0.reset();
  std::filesystem::remove_all(dir_ + "/ckpt-d0");

  auto again = LaunchDaemon(member("d0", {0}));
  ASSERT_NE(again, nullptr);
  ASSERT_TRUE(again->finished.WaitForNotificationWithTimeout(absl::Seconds(240)));
  again->Join();
  EXPECT_TRUE(again->result.ok()) << again->result;
  ASSERT_TRUE(founder->finished.WaitForNotificationWithTimeout(absl::Seconds(120)));
  founder->Join();
  b->signals.stop.store(true);
  b->Join();
  EXPECT_TRUE(founder->result.ok()) << founder->result;
  int64_t entry = -1;
  {
    absl::MutexLock lock(&again->mu);
    ASSERT_FALSE(again->reports.empty());
    entry = static_cast<int64_t>(again->reports.front().iteration);
    EXPECT_GT(entry, d0_last);
    EXPECT_LE(entry, d0_last + 2);
    EXPECT_EQ(static_cast<int64_t>(again->reports.back().iteration), kIterations - 1);
    for (const NodeIterationReport& r : again->reports) {
      ASSERT_TRUE(r.data.has_value());
      EXPECT_GT(r.data->completed, 0) << "iteration " << r.iteration;
      EXPECT_TRUE(std::isfinite(r.data->loss)) << "iteration " << r.iteration;
    }
  }
  EXPECT_EQ(Counter(*again, "skipswarm_stage_restores_total"), 1);
  std::printf("d0, the only data node, stopped after iteration %lld; restarted without its "
              "disk, it restored stage 0 from a peer's copy and entered at %lld\n",
              static_cast<long long>(d0_last), static_cast<long long>(entry));
  ExpectFinalCheckpointsAtTheEnd({{"d0", 0}, {"a", 1}, {"b", 2}});
}

}  // namespace
}  // namespace skipswarm::node
