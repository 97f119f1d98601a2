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
// with no copy, fails naming the stage while the data node stays paused;
// the only data node, restarted without its disk, restores stage 0 the
// same way. GossipDaemons in one process over loopback gRPC (ports 0).
#include <atomic>
#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "third_party/cpp_httplib.h"
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
    if (tweak_) tweak_(o);
    return o;
  }

  // The founder on `o`, of a swarm that forms with `expect_members`;
  // Member's options then join it.
  std::unique_ptr<RunningDaemon> StartFounder(const GossipDaemonOptions& o, int expect_members) {
    std::unique_ptr<RunningDaemon> founder = LaunchFounder(o, expect_members);
    if (founder != nullptr) bootstrap_ = founder->daemon->gossip_address();
    expect_members_ = expect_members;
    return founder;
  }

  // Options(name, stages) for a member joining the founder's swarm.
  GossipDaemonOptions Member(const std::string& name, std::vector<int> stages) {
    GossipDaemonOptions o = Options(name, std::move(stages));
    o.expect_members = expect_members_;
    o.gossip.join = {bootstrap_};
    return o;
  }

  // Waits up to `limit` for `d` to return from Run, joins it and expects
  // it to have succeeded. Call under ASSERT_NO_FATAL_FAILURE.
  static void FinishCleanly(RunningDaemon& d, absl::Duration limit) {
    ASSERT_TRUE(d.finished.WaitForNotificationWithTimeout(limit));
    d.Join();
    EXPECT_TRUE(d.result.ok()) << d.result;
  }

  // Asks `d` to stop and FinishCleanly's it.
  static void StopCleanly(RunningDaemon& d) {
    d.signals.stop.store(true);
    FinishCleanly(d, absl::Seconds(60));
  }

  // Once `d` reached its `reach`, stops it cleanly; `last` is its last
  // iteration.
  static void StopAfterReach(RunningDaemon& d, int64_t* last) {
    ASSERT_TRUE(d.WaitUnlessFinished(d.reached)) << d.result;
    ASSERT_NO_FATAL_FAILURE(StopCleanly(d));
    *last = d.LastIteration();
  }

  // `name`'s disk (its checkpoints) goes with it.
  void LoseDisk(const std::string& name) { std::filesystem::remove_all(dir_ + "/ckpt-" + name); }

  struct Node {
    std::string name;
    int stage;
  };
  struct SwarmAfterLoss {
    std::unique_ptr<RunningDaemon> founder, other, again;
    int64_t lost_last = -1;  // the last iteration `lost` finished
  };
  // A swarm of three one-stage members: `founder`, `other` and `lost`, the
  // only replica of its stage, which stops after iteration 13 and is gone
  // for good with its disk (a stopped daemon's servers would still answer
  // probes), so the swarm pauses.
  void LoseTheOnlyReplica(const Node& founder, const Node& other, const Node& lost,
                          SwarmAfterLoss* s) {
    s->founder = StartFounder(Options(founder.name, {founder.stage}), /*expect_members=*/3);
    ASSERT_NE(s->founder, nullptr);
    s->other = LaunchDaemon(Member(other.name, {other.stage}));
    auto gone = LaunchDaemon(Member(lost.name, {lost.stage}), /*reach=*/13);
    ASSERT_TRUE(s->other && gone);
    ASSERT_NO_FATAL_FAILURE(StopAfterReach(*gone, &s->lost_last));
    gone.reset();
    LoseDisk(lost.name);
  }

  // `lost` restarts as `s->again` (Member's options, no disk) and runs to
  // the end with the founder; `entry`, its first iteration, is the one the
  // swarm paused in: right after its exit iteration, or the one after that
  // it finished while stopping.
  void RestartTheLost(const Node& lost, SwarmAfterLoss* s, int64_t* entry) {
    s->again = LaunchDaemon(Member(lost.name, {lost.stage}));
    ASSERT_NO_FATAL_FAILURE(FinishAfterRestore(s->again.get(), *s->founder, *s->other, entry));
    EXPECT_GT(*entry, s->lost_last);
    EXPECT_LE(*entry, s->lost_last + 2);
  }

  // `again`, launched to take over the lost stage, and the founder both
  // run to the end, then `other` is stopped. `entry` is `again`'s first
  // iteration; its last is the run's last.
  static void FinishAfterRestore(RunningDaemon* again, RunningDaemon& founder,
                                 RunningDaemon& other, int64_t* entry) {
    ASSERT_NE(again, nullptr);
    ASSERT_NO_FATAL_FAILURE(FinishCleanly(*again, absl::Seconds(240)));
    ASSERT_NO_FATAL_FAILURE(FinishCleanly(founder, absl::Seconds(120)));
    other.signals.stop.store(true);
    other.Join();
    absl::MutexLock lock(&again->mu);
    ASSERT_FALSE(again->reports.empty());
    *entry = static_cast<int64_t>(again->reports.front().iteration);
    EXPECT_EQ(static_cast<int64_t>(again->reports.back().iteration), kIterations - 1);
  }

  // Every iteration d0 finished trained (micro-batches finished, a finite
  // loss): none ran empty while paused, and the paused one was re-run.
  // A failure names the drops by cause: "stopping_unconfirmed" is a
  // relayed refusal of the lost replica's that the data node could not
  // confirm from its record (Note [Confirmed stopping]), which should have
  // been re-run.
  // `departure`: the iteration a lost member stopped in, whose in-flight
  // micro-batches may be lost with it (dropped, never a finite loss of
  // nothing); seen 1 run in 8 when the member went while they were on it.
  static void ExpectEveryIterationTrained(RunningDaemon& d0,
                                          std::optional<int64_t> departure = std::nullopt) {
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
      if (departure == static_cast<int64_t>(r.iteration) && r.data->completed == 0) {
        EXPECT_GT(r.data->dropped, 0) << what;
        continue;
      }
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

  // This test's own changes to every daemon's options (Options applies them).
  std::function<void(GossipDaemonOptions&)> tweak_;

 private:
  std::string bootstrap_;
  int expect_members_ = 0;
};

TEST_F(PeerCopyRestoreTest, AJoinerRestoresAStageWithoutReplicaFromAPeersCopy) {
  auto founder = StartFounder(Options("d0", {0}), /*expect_members=*/3);
  ASSERT_NE(founder, nullptr);
  auto a = LaunchDaemon(Member("a", {1}));
  auto b = LaunchDaemon(Member("b", {2}), /*reach=*/13);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(b->reached.WaitForNotificationWithTimeout(absl::Seconds(180)));
  // Stage 2 goes (its disk with it: the joiner has its own, empty one).
  ASSERT_NO_FATAL_FAILURE(StopCleanly(*b));
  const int64_t b_last = b->LastIteration();
  // Before: the joiner waited for a live replica of stage 2 until its
  // start-up deadline and failed ("no replica of stage 2 answers").
  GossipDaemonOptions j = Options("j", {2});
  j.gossip.join = {founder->daemon->gossip_address()};
  auto joiner = LaunchDaemon(j);
  int64_t entry = -1;
  ASSERT_NO_FATAL_FAILURE(FinishAfterRestore(joiner.get(), *founder, *a, &entry));
  // It entered at the iteration the swarm paused in, right after b's exit
  // iteration (b's last report, or the one after it that b finished while
  // stopping).
  EXPECT_GT(entry, b_last);
  EXPECT_LE(entry, b_last + 2);
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
  auto founder = StartFounder(Options("d0", {0}), /*expect_members=*/3);
  ASSERT_NE(founder, nullptr);
  auto a = LaunchDaemon(Member("a", {1, 2}), /*reach=*/13);
  auto p = LaunchDaemon(Member("p", {1}));
  ASSERT_TRUE(a && p);
  int64_t a_last = -1;
  ASSERT_NO_FATAL_FAILURE(StopAfterReach(*a, &a_last));
  LoseDisk("a");

  auto again = LaunchDaemon(Member("a", {1, 2}));
  int64_t entry = -1;
  ASSERT_NO_FATAL_FAILURE(FinishAfterRestore(again.get(), *founder, *p, &entry));
  // The iteration the swarm paused in, right after a's exit iteration.
  EXPECT_GT(entry, a_last);
  EXPECT_LE(entry, a_last + 2);
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
  tweak_ = [](GossipDaemonOptions& o) {
    o.base.checkpoint_every = 10;
    o.base.metrics_port = 0;
  };
  // d0 holds the swarm at two boundaries (its observer runs before its
  // next iteration starts) while the test asks a, then q, to leave, so
  // both leave before the boundary of 20 and its copies.
  absl::Notification at_12, go_12, at_16, go_16;
  GossipDaemonOptions d0 = Options("d0", {0});
  d0.observer = [&](const NodeIterationReport& r) {
    if (r.iteration == 12) {
      at_12.Notify();
      go_12.WaitForNotificationWithTimeout(absl::Seconds(120));
    } else if (r.iteration == 16) {
      at_16.Notify();
      go_16.WaitForNotificationWithTimeout(absl::Seconds(120));
    }
  };
  auto founder = StartFounder(d0, /*expect_members=*/4);
  ASSERT_NE(founder, nullptr);
  auto a = LaunchDaemon(Member("a", {1, 2}));
  auto q = LaunchDaemon(Member("q", {2}));
  auto p = LaunchDaemon(Member("p", {1}));
  ASSERT_TRUE(a && q && p);
  ASSERT_TRUE(founder->WaitUnlessFinished(at_12)) << founder->result;
  EXPECT_TRUE(a->daemon->RequestDrain(/*force=*/false).ok());
  go_12.Notify();
  ASSERT_NO_FATAL_FAILURE(FinishCleanly(*a, absl::Seconds(60)));
  ASSERT_TRUE(founder->WaitUnlessFinished(at_16)) << founder->result;
  // q is stage 2's last replica now: it leaves anyway.
  EXPECT_TRUE(q->daemon->RequestDrain(/*force=*/true).ok());
  go_16.Notify();
  ASSERT_NO_FATAL_FAILURE(FinishCleanly(*q, absl::Seconds(60)));
  const int64_t q_last = q->LastIteration();
  // Gone for good: a stopped daemon's servers would still answer probes.
  a.reset();
  q.reset();
  const int64_t own = CheckpointStep("a", 2);
  // The newest copy of stage 2 is that of 10: 20 never came.
  ASSERT_GT(own, 10) << "a's final checkpoint is no newer than the copy";
  ASSERT_LT(q_last, 19);
  ASSERT_GT(q_last + 1, own) << "the swarm paused no later than a's own state";

  auto again = LaunchDaemon(Member("a", {1, 2}));
  int64_t entry = -1;
  ASSERT_NO_FATAL_FAILURE(FinishAfterRestore(again.get(), *founder, *p, &entry));
  EXPECT_GT(entry, own);
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
  tweak_ = [](GossipDaemonOptions& o) { o.base.metrics_port = 0; };
  SwarmAfterLoss s;
  ASSERT_NO_FATAL_FAILURE(LoseTheOnlyReplica({"d0", 0}, {"a", 1}, {"b", 2}, &s));
  int64_t entry = -1;
  ASSERT_NO_FATAL_FAILURE(RestartTheLost({"b", 2}, &s, &entry));
  EXPECT_EQ(Counter(*s.again, "skipswarm_stage_restores_total"), 1);
  ExpectEveryIterationTrained(*s.founder, /*departure=*/s.lost_last + 1);
  std::printf("b, stage 2's only replica, stopped after iteration %lld; restarted without its "
              "disk, it restored stage 2 from a peer's copy and entered at %lld\n",
              static_cast<long long>(s.lost_last), static_cast<long long>(entry));
  ExpectFinalCheckpointsAtTheEnd({{"d0", 0}, {"a", 1}, {"b", 2}});
}

// The same restart with no copy anywhere (copies off) and no disk: nothing
// to restore stage 2 from. b fails at its start-up deadline naming the
// stage, and d0 stays paused: no iteration runs empty. Before, b formed as
// a founder at iteration 0 and d0 ran the rest of its iterations empty.
TEST_F(PeerCopyRestoreTest, ARestartedMemberWithNoStateOfItsOrphanedStageFailsNamingIt) {
  tweak_ = [](GossipDaemonOptions& o) { o.checkpoint_copies = 0; };
  SwarmAfterLoss s;
  ASSERT_NO_FATAL_FAILURE(LoseTheOnlyReplica({"d0", 0}, {"a", 1}, {"b", 2}, &s));
  const int64_t b_last = s.lost_last;

  GossipDaemonOptions o = Member("b", {2});
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
  s.founder->signals.stop.store(true);
  s.other->signals.stop.store(true);
  s.founder->Join();
  s.other->Join();
  absl::MutexLock lock(&s.founder->mu);
  for (const NodeIterationReport& r : s.founder->reports) {
    ASSERT_TRUE(r.data.has_value());
    // The paused iteration (b_last + 1) ends when the test stops d0, empty.
    if (static_cast<int64_t>(r.iteration) > b_last) continue;
    EXPECT_GT(r.data->completed, 0) << "iteration " << r.iteration << " ran empty";
  }
  EXPECT_LE(static_cast<int64_t>(s.founder->reports.back().iteration), b_last + 1);
  std::printf("b stopped after iteration %lld; restarted without disk or copies, it failed: %s\n",
              static_cast<long long>(b_last), again->result.ToString().c_str());
}

// Note [Behind on any stage] (gossip_daemon_join.cc) with a stage
// orphaned meanwhile: a (1+2) with p (1) and q (2); four founders. a's
// trainer stalls after an iteration (its observer blocks, as a SIGSTOP or
// a suspended machine stops its training) while p and q train on with d0
// well past the stage server's lead; d0 then holds the swarm at kHold (its
// observer) while q, stage 2's other replica, stops for good and a is let
// go. a trails p on stage 1 and stage 2 has no replica to fetch from, so
// its re-entry goes through the peer-copy restore (Note [Restore from peer
// copies]): stage 2 from the newest state of it (Note [Newest state wins]:
// a's own state of the stall, or a newer copy of q's), advanced to the
// entry, stage 1 from p's state at that entry. d0 goes on once a announced
// its entry:
// a re-enters once, past kHold, averages stage 1 with p from its entry
// on, every d0 iteration from its entry on trains with a finite loss, and
// stage 2 lost no more iterations than from its stall to its entry, as a
// stated (skipswarm_stage_restore_lost_iterations_total).
// Without the hold, d0 ran iterations kHold..39 empty in under a second
// once q left (routing stage 2 through the stalled a, whose server refused
// them "behind"), before a's behind check could re-enter it.
TEST_F(PeerCopyRestoreTest, AStalledMemberReentersRestoringAStageOrphanedMeanwhile) {
  tweak_ = [](GossipDaemonOptions& o) { o.base.metrics_port = 0; };
  constexpr uint64_t kStallAfter = 6;
  constexpr uint64_t kHold = kStallAfter + 12;  // well past the lead (4)
  absl::Notification at_hold, go_on;
  GossipDaemonOptions d0 = Options("d0", {0});
  d0.observer = [&](const NodeIterationReport& r) {
    if (r.iteration != kHold) return;
    at_hold.Notify();
    go_on.WaitForNotificationWithTimeout(absl::Seconds(180));
  };
  auto founder = StartFounder(d0, /*expect_members=*/4);
  ASSERT_NE(founder, nullptr);
  absl::Notification stalled, released, restored;
  std::atomic<bool> once{false};
  std::atomic<int64_t> entry{-1};
  GossipDaemonOptions ao = Member("a", {1, 2});
  ao.observer = [&](const NodeIterationReport& report) {
    if (report.iteration < kStallAfter || once.exchange(true)) return;
    stalled.Notify();
    released.WaitForNotificationWithTimeout(absl::Seconds(300));
  };
  ao.after_stage_restore = [&](uint64_t at) {
    entry.store(static_cast<int64_t>(at));
    if (!restored.HasBeenNotified()) restored.Notify();
  };
  auto a = LaunchDaemon(ao);
  auto p = LaunchDaemon(Member("p", {1}));
  auto q = LaunchDaemon(Member("q", {2}));
  ASSERT_TRUE(a && p && q);
  // Every failure below lets a and d0 go (their observers block).
  struct LetGo {
    absl::Notification& a;
    absl::Notification& d0;
    ~LetGo() {
      if (!a.HasBeenNotified()) a.Notify();
      if (!d0.HasBeenNotified()) d0.Notify();
    }
  } let_go{released, go_on};
  ASSERT_TRUE(a->WaitUnlessFinished(stalled)) << a->result;
  const int64_t stalled_at = a->LastIteration();
  ASSERT_TRUE(founder->WaitUnlessFinished(at_hold))
      << "d0 did not train on past the stalled member: " << founder->result;
  ASSERT_NO_FATAL_FAILURE(StopCleanly(*q));
  const int64_t q_last = q->LastIteration();
  q.reset();  // gone for good: a stopped daemon's servers would still answer probes
  released.Notify();
  ASSERT_TRUE(a->WaitUnlessFinished(restored))
      << "the stalled member did not re-enter through the restore: " << a->result;
  go_on.Notify();
  ASSERT_NO_FATAL_FAILURE(FinishCleanly(*a, absl::Seconds(240)));
  ASSERT_NO_FATAL_FAILURE(FinishCleanly(*founder, absl::Seconds(120)));
  ASSERT_NO_FATAL_FAILURE(StopCleanly(*p));

  const int64_t entered = entry.load();
  EXPECT_GT(entered, static_cast<int64_t>(kHold))
      << "a entered at an iteration the swarm had passed";
  {
    absl::MutexLock lock(&a->mu);
    int64_t first = -1;
    for (const NodeIterationReport& r : a->reports) {
      const int64_t at = static_cast<int64_t>(r.iteration);
      if (at <= stalled_at) continue;
      if (first < 0) first = at;
      // Stage 1 with p from the entry on (the fetch checked its digest).
      auto one = r.stages.find(1);
      ASSERT_NE(one, r.stages.end()) << "a's iteration " << at;
      EXPECT_EQ(one->second.replicas, 2)
          << "a's iteration " << at << " after its re-entry averaged stage 1 without p";
    }
    EXPECT_EQ(first, entered) << "a trained an iteration before its entry (its own old state)";
    EXPECT_EQ(static_cast<int64_t>(a->reports.back().iteration), kIterations - 1);
  }
  EXPECT_EQ(Counter(*a, "skipswarm_reentries_total"), 1);
  EXPECT_EQ(Counter(*a, "skipswarm_stage_restores_total"), 1);
  // Note [Newest state wins]: a's own state of the stall is the oldest it
  // may take; a copy of q's only loses less.
  const double lost = Counter(*a, "skipswarm_stage_restore_lost_iterations_total");
  EXPECT_GT(lost, 0);
  EXPECT_LE(lost, static_cast<double>(entered - (stalled_at + 1)))
      << "stage 2 lost more than from a's stall (" << stalled_at << ") to its entry";
  int64_t empty = 0;
  {
    absl::MutexLock lock(&founder->mu);
    ASSERT_EQ(founder->reports.size(), static_cast<size_t>(kIterations));
    for (const NodeIterationReport& r : founder->reports) {
      const int64_t at = static_cast<int64_t>(r.iteration);
      ASSERT_TRUE(r.data.has_value());
      if (at > stalled_at && at < entered) {
        if (r.data->completed == 0) ++empty;
        continue;
      }
      EXPECT_GT(r.data->completed, 0)
          << "d0's iteration " << at << " (a stalled after " << stalled_at << ", entered at "
          << entered << ")";
      EXPECT_TRUE(std::isfinite(r.data->loss)) << "d0's iteration " << at;
    }
  }
  std::printf("a (1+2) stalled after iteration %lld; q, stage 2's other replica, stopped after "
              "%lld; a re-entered at %lld, restoring stage 2 (%.0f iterations of it lost); d0 "
              "ran %lld of the iterations in between empty\n",
              static_cast<long long>(stalled_at), static_cast<long long>(q_last),
              static_cast<long long>(entered), lost, static_cast<long long>(empty));
  ExpectFinalCheckpointsAtTheEnd({{"d0", 0}, {"p", 1}, {"a", 1}, {"a", 2}});
}

// The data node as the member whose every stage is orphaned: d0, the only
// data node, stops and restarts without its disk; it restores stage 0 from
// a peer's copy and training resumes where the swarm waited, every
// iteration of the restored d0 trained. Note [Data node entered later]
// (node/train/data_node_wait.h): 1 run in 4 the relays stopped one
// iteration apart (a started the iteration after d0's exit while d0 was
// still in its view and ran it empty; b heard of the leave first and
// waited before it), d0 entered at a's, and b waited for a data node in
// its own iteration for good: d0's micro-batches waited at b out their
// 2-min deadline, and two iterations ran empty. Now b passes its iteration
// empty as a did and trains with d0 from its entry.
TEST_F(PeerCopyRestoreTest, ARestartedSoleDataNodeRestoresStageZeroFromACopy) {
  tweak_ = [](GossipDaemonOptions& o) { o.base.metrics_port = 0; };
  SwarmAfterLoss s;
  ASSERT_NO_FATAL_FAILURE(LoseTheOnlyReplica({"a", 1}, {"b", 2}, {"d0", 0}, &s));
  int64_t entry = -1;
  ASSERT_NO_FATAL_FAILURE(RestartTheLost({"d0", 0}, &s, &entry));
  {
    absl::MutexLock lock(&s.again->mu);
    for (const NodeIterationReport& r : s.again->reports) {
      ASSERT_TRUE(r.data.has_value());
      EXPECT_GT(r.data->completed, 0) << "iteration " << r.iteration;
      EXPECT_TRUE(std::isfinite(r.data->loss)) << "iteration " << r.iteration;
    }
  }
  EXPECT_EQ(Counter(*s.again, "skipswarm_stage_restores_total"), 1);
  std::printf("d0, the only data node, stopped after iteration %lld; restarted without its "
              "disk, it restored stage 0 from a peer's copy and entered at %lld\n",
              static_cast<long long>(s.lost_last), static_cast<long long>(entry));
  ExpectFinalCheckpointsAtTheEnd({{"d0", 0}, {"a", 1}, {"b", 2}});
}

}  // namespace
}  // namespace skipswarm::node
