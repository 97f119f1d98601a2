// Note [Restore from peer copies] (node/daemon/gossip/gossip_daemon_restore.cc):
// in a plain gossip swarm (no launcher), stage 2's only replica stops, the
// data node pauses, and a joiner that is to host stage 2 restores it from
// the newest checkpoint copy its peers hold (Note [Checkpoint copies]);
// training resumes at the paused iteration and every node finishes; and a
// member hosting two stages, one of them orphaned, restores that one and
// fetches the other at the same entry.
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

}  // namespace
}  // namespace skipswarm::node
