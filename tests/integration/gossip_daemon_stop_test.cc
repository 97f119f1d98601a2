// Note [Stopping] (gossip_daemon.cc): SIGTERM ends a node within the stop
// bound with a checkpoint in every state: while founders wait for the swarm
// to form (the wait ends at once), while training (a drain), as the last
// replica of a stage (it used to be ignored), and while training is paused
// for a lost stage (a drain there used to wait 120 s and leave without a
// checkpoint). Each prints how long it took (the figures in
// node/daemon/README.md). GossipDaemons in one process over loopback gRPC
// (ports 0).
#include <algorithm>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/cleanup/cleanup.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/real_clock.h"
#include "gtest/gtest.h"
#include "tests/integration/running_daemon.h"
#include "tests/integration/tiny_gossip_options.h"
#include "node/daemon/gossip/gossip_daemon.h"

namespace skipswarm::node {
namespace {

class GossipDaemonStopTest : public TinySwarmFolderTest {
 protected:
  GossipDaemonStopTest() : TinySwarmFolderTest("stop") {}

  GossipDaemonOptions Options(const std::string& name, std::vector<int> stages) {
    GossipDaemonOptions o =
        TinyGossipOptions(name, std::move(stages), corpus_, "gossip-daemon-stop-test");
    o.base.iterations = 1000000;  // stopped by the test
    o.base.startup_timeout = absl::Seconds(30);
    o.base.model.checkpoint_dir = dir_ + "/ckpt-" + name;
    o.stop_timeout = absl::Seconds(5);
    return o;
  }

};

bool HasCheckpoint(const std::string& dir) {
  std::error_code ec;
  return std::filesystem::exists(dir, ec) && !std::filesystem::is_empty(dir, ec);
}

// Every one of `peers` has `leaver` LEFT with `exit_iteration` in its view.
void ExpectLeftIn(std::initializer_list<RunningDaemon*> peers, RunningDaemon& leaver,
                  int64_t exit_iteration) {
  const std::string address = leaver.daemon->gossip_address();
  for (RunningDaemon* peer : peers) {
    const membership::View view = peer->daemon->view();
    const membership::MemberInfo* found = nullptr;
    for (const membership::MemberInfo& m : view.members) {
      if (std::find(m.addresses.begin(), m.addresses.end(), address) != m.addresses.end()) {
        found = &m;
      }
    }
    ASSERT_NE(found, nullptr);
    EXPECT_EQ(found->state, proto::MEMBER_STATE_LEFT)
        << "not LEFT while its final checkpoint is held";
    EXPECT_EQ(static_cast<int64_t>(found->iteration), exit_iteration);
  }
}

// Holds a daemon's final checkpoint (GossipDaemonOptions::
// before_final_checkpoint) until `release`; `at_checkpoint` says it got there.
struct CheckpointHold {
  absl::Notification at_checkpoint, release;
};
std::shared_ptr<CheckpointHold> HoldFinalCheckpoint(GossipDaemonOptions& o) {
  auto hold = std::make_shared<CheckpointHold>();
  o.before_final_checkpoint = [hold] {
    hold->at_checkpoint.Notify();
    hold->release.WaitForNotificationWithTimeout(absl::Seconds(300));
  };
  return hold;
}

// SIGTERM, then how long until Run returned (the stop bound is 30 s by
// default; these tests use 5 s).
double SigtermSeconds(RunningDaemon& r, absl::Duration limit) {
  auto clock = common::RealClock::Create();
  const absl::Duration t0 = clock->SteadyNow();
  r.signals.drain.store(true);
  if (!r.finished.WaitForNotificationWithTimeout(limit)) return -1;
  return absl::ToDoubleSeconds(clock->SteadyNow() - t0);
}

TEST_F(GossipDaemonStopTest, ASignalWhileTheSwarmFormsEndsTheWaitAtOnce) {
  GossipDaemonOptions o = Options("lonely", {0});
  o.expect_members = 3;  // never comes
  o.base.listen = "127.0.0.1:0";
  auto r = LaunchDaemon(o);
  ASSERT_NE(r, nullptr);
  // Before: the wait ran to the 30 s startup timeout and failed.
  const double took = SigtermSeconds(*r, absl::Seconds(15));
  EXPECT_GE(took, 0) << "SIGTERM was not honoured while waiting for the swarm";
  r->Join();
  EXPECT_TRUE(r->result.ok()) << r->result;
  EXPECT_TRUE(HasCheckpoint(dir_ + "/ckpt-lonely")) << "no checkpoint at a stop while founding";
  std::printf("SIGTERM while founding: exited in %.2f s with a checkpoint\n", took);
}

// Training, then paused: five nodes (stage 1 with three replicas). a3
// drains while the swarm trains; b (stage 2's only replica) stops, so the
// data node pauses; then a2 drains while paused, d0 (the last replica of
// stage 0, the data node) and a (now stage 1's last replica) stop on
// SIGTERM while paused. Each with a checkpoint; a2 and a have a stop bound
// longer than the test waits: a paused swarm finishes no iteration, so a
// relay's stop must not wait for one (before, both sat out the bound: 30 s
// by default, past the 30 s an operator is promised).
TEST_F(GossipDaemonStopTest, SigtermWhileTrainingAndWhilePausedEndsWithinTheBound) {
  const GossipDaemonOptions d0 = Options("d0", {0});
  auto founder = LaunchFounder(d0, /*expect_members=*/5);
  ASSERT_NE(founder, nullptr);
  const std::string bootstrap = founder->daemon->gossip_address();
  auto member = [&](const std::string& name, int stage, int64_t reach = -1) {
    GossipDaemonOptions o = Options(name, {stage});
    if (name == "a" || name == "a2") o.stop_timeout = absl::Seconds(120);
    o.expect_members = 5;
    o.gossip.join = {bootstrap};
    return LaunchDaemon(o, reach);
  };
  auto a = member("a", 1);
  auto a2 = member("a2", 1);
  auto a3 = member("a3", 1, /*reach=*/3);
  auto b = member("b", 2);
  ASSERT_TRUE(a && a2 && a3 && b);
  ASSERT_TRUE(a3->reached.WaitForNotificationWithTimeout(absl::Seconds(120)));

  const double training = SigtermSeconds(*a3, absl::Seconds(60));
  EXPECT_GE(training, 0) << "a drain while training did not end";
  EXPECT_LE(training, 30);
  a3->Join();
  EXPECT_TRUE(a3->result.ok()) << a3->result;
  EXPECT_TRUE(HasCheckpoint(dir_ + "/ckpt-a3"));

  // Stage 2 goes: the data node pauses (Note [Paused training]).
  b->signals.stop.store(true);
  ASSERT_TRUE(b->finished.WaitForNotificationWithTimeout(absl::Seconds(60)));
  b->Join();
  const int64_t paused_at = founder->LastIteration();
  // Before: a drain waited for an exit iteration that never finishes, until
  // the stop bound (120 s for a2 here).
  const double paused_drain = SigtermSeconds(*a2, absl::Seconds(60));
  EXPECT_GE(paused_drain, 0) << "a drain while paused waited for an iteration";
  EXPECT_LT(paused_drain, 20);
  a2->Join();
  EXPECT_TRUE(a2->result.ok()) << a2->result;
  EXPECT_TRUE(HasCheckpoint(dir_ + "/ckpt-a2")) << "a drain while paused left no checkpoint";
  const double paused_last = SigtermSeconds(*founder, absl::Seconds(60));
  EXPECT_GE(paused_last, 0);
  EXPECT_LT(paused_last, 20);
  founder->Join();
  EXPECT_TRUE(founder->result.ok()) << founder->result;
  EXPECT_TRUE(HasCheckpoint(dir_ + "/ckpt-d0"));
  EXPECT_LE(founder->LastIteration(), paused_at + 1) << "the data node did not pause";
  // a: stage 1's last replica, a relay, paused: a stop, not a drain.
  const double paused_relay = SigtermSeconds(*a, absl::Seconds(60));
  EXPECT_GE(paused_relay, 0) << "the last replica's stop while paused waited for an iteration";
  EXPECT_LT(paused_relay, 20);
  if (!a->finished.HasBeenNotified()) a->signals.stop.store(true);
  a->Join();
  EXPECT_TRUE(a->result.ok()) << a->result;
  EXPECT_TRUE(HasCheckpoint(dir_ + "/ckpt-a"));
  std::printf("SIGTERM while training (drain): %.2f s; while paused: drain %.2f s, data node "
              "%.2f s, last replica (a relay) %.2f s; each with a checkpoint\n",
              training, paused_drain, paused_last, paused_relay);
}

TEST_F(GossipDaemonStopTest, SigtermOnTheLastReplicaStopsItWithACheckpoint) {
  const GossipDaemonOptions d0 = Options("d0", {0});
  auto founder = LaunchFounder(d0, /*expect_members=*/3);
  ASSERT_NE(founder, nullptr);
  const std::string bootstrap = founder->daemon->gossip_address();
  GossipDaemonOptions a = Options("a", {1});
  a.expect_members = 3;
  a.gossip.join = {bootstrap};
  GossipDaemonOptions b = Options("b", {2});
  b.expect_members = 3;
  b.gossip.join = {bootstrap};
  auto ra = LaunchDaemon(a);
  auto rb = LaunchDaemon(b, /*reach=*/3);
  ASSERT_NE(ra, nullptr);
  ASSERT_NE(rb, nullptr);
  ASSERT_TRUE(rb->reached.WaitForNotificationWithTimeout(absl::Seconds(120)));

  // b is the only replica of stage 2: SIGTERM cannot drain it, so it stops
  // with a checkpoint within its stop bound instead of being ignored.
  rb->signals.drain.store(true);
  auto clock = common::RealClock::Create();
  const absl::Duration t0 = clock->SteadyNow();
  EXPECT_TRUE(rb->finished.WaitForNotificationWithTimeout(absl::Seconds(60)))
      << "SIGTERM on the last replica was ignored";
  std::printf("SIGTERM on the last replica while training: exited in %.2f s\n",
              absl::ToDoubleSeconds(clock->SteadyNow() - t0));
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

// Note [Stopping]: a stop signs LEFT with its exit iteration before its
// final checkpoint, as a drain does (Note [Leaving]). b (one of stage 2's
// two replicas) stops; its final checkpoint is held by the test. While it
// is held, its peers' views already show b LEFT with the iteration it
// stopped after, and the data node's next plan trains stage 2 on b2 alone
// with nothing dropped. Before, b signed LEFT only after its checkpoint
// and push flush: in that window every peer saw it alive, and the data
// node planned micro-batches through it that waited out their deadline
// (b2 did not even finish that iteration while b's checkpoint was held).
TEST_F(GossipDaemonStopTest, AStopSignsLeftBeforeItsFinalCheckpoint) {
  std::shared_ptr<CheckpointHold> hold;
  const GossipDaemonOptions d0 = Options("d0", {0});
  auto founder = LaunchFounder(d0, /*expect_members=*/4);
  ASSERT_NE(founder, nullptr);
  const std::string bootstrap = founder->daemon->gossip_address();
  auto member = [&](const std::string& name, int stage, int64_t reach = -1) {
    GossipDaemonOptions o = Options(name, {stage});
    o.expect_members = 4;
    o.gossip.join = {bootstrap};
    if (name == "b") {
      // Long enough that b finishes its exit iteration on a loaded machine.
      o.stop_timeout = absl::Seconds(120);
      hold = HoldFinalCheckpoint(o);
    }
    return LaunchDaemon(o, reach);
  };
  auto a = member("a", 1);
  auto b = member("b", 2, /*reach=*/3);
  auto b2 = member("b2", 2);
  ASSERT_TRUE(a && b && b2);
  // A failed assertion must not leave b blocked while the daemons go.
  absl::Cleanup release = [hold] {
    if (!hold->release.HasBeenNotified()) hold->release.Notify();
  };
  ASSERT_TRUE(b->reached.WaitForNotificationWithTimeout(absl::Seconds(120)));

  b->signals.stop.store(true);
  ASSERT_TRUE(b->WaitUnlessFinished(hold->at_checkpoint));
  // The trainer reported every iteration it ran: its last is the exit one.
  const int64_t exit_iteration = b->LastIteration();
  // Leave returned once the members it told answered: with four members it
  // tells all three.
  ExpectLeftIn({founder.get(), a.get(), b2.get()}, *b, exit_iteration);
  // The data node knew b left when it planned every iteration after the
  // one it is in now; the next such one runs while b's checkpoint is held.
  const int64_t next = founder->LastIteration() + 2;
  auto trained = [](RunningDaemon* r, int64_t it) {
    absl::MutexLock lock(&r->mu);
    for (const NodeIterationReport& report : r->reports) {
      if (static_cast<int64_t>(report.iteration) == it) return std::optional(report);
    }
    return std::optional<NodeIterationReport>();
  };
  ASSERT_GT(next, exit_iteration);
  for (RunningDaemon* r : {founder.get(), b2.get()}) {
    ASSERT_TRUE(r->WaitForIteration(next, absl::Seconds(120)))
        << "iteration " << next << " did not finish while b's checkpoint was held";
  }
  std::optional<NodeIterationReport> d0_next, b2_next;
  d0_next = trained(founder.get(), next);
  b2_next = trained(b2.get(), next);
  ASSERT_TRUE(d0_next.has_value() && d0_next->data.has_value());
  ASSERT_TRUE(b2_next.has_value() && b2_next->stages.count(2) == 1);
  EXPECT_EQ(d0_next->data->dropped, 0) << "micro-batches were planned through b";
  EXPECT_EQ(d0_next->data->completed, d0.base.mbs_per_iteration);
  EXPECT_EQ(b2_next->stages[2].replicas, 1) << "b still averaged stage 2";
  EXPECT_EQ(b2_next->stages[2].visits_here, d0.base.mbs_per_iteration);
  EXPECT_FALSE(b->finished.HasBeenNotified());

  std::move(release).Invoke();
  b->Join();
  EXPECT_TRUE(b->result.ok()) << b->result;
  EXPECT_TRUE(HasCheckpoint(dir_ + "/ckpt-b")) << "the checkpoint was not written";
  for (RunningDaemon* r : {founder.get(), a.get(), b2.get()}) r->signals.stop.store(true);
  for (RunningDaemon* r : {founder.get(), a.get(), b2.get()}) {
    r->Join();
    EXPECT_TRUE(r->result.ok()) << r->result;
  }
  std::printf("b stopped after iteration %lld and was LEFT in every view while its checkpoint "
              "was held; iteration %lld trained stage 2 on b2 alone\n",
              static_cast<long long>(exit_iteration), static_cast<long long>(next));
}

// The same for the last replica of a stage: it signs once its trainer has
// ended (Note [Stopping]), still before its checkpoint and push flush.
TEST_F(GossipDaemonStopTest, TheLastReplicasStopSignsLeftBeforeItsFinalCheckpoint) {
  const GossipDaemonOptions d0 = Options("d0", {0});
  auto founder = LaunchFounder(d0, /*expect_members=*/3);
  ASSERT_NE(founder, nullptr);
  GossipDaemonOptions a = Options("a", {1}), b = Options("b", {2});
  for (GossipDaemonOptions* o : {&a, &b}) {
    o->expect_members = 3;
    o->gossip.join = {founder->daemon->gossip_address()};
  }
  std::shared_ptr<CheckpointHold> hold = HoldFinalCheckpoint(b);
  auto ra = LaunchDaemon(a);
  auto rb = LaunchDaemon(b, /*reach=*/3);
  ASSERT_TRUE(ra && rb);
  absl::Cleanup release = [hold] {
    if (!hold->release.HasBeenNotified()) hold->release.Notify();
  };
  ASSERT_TRUE(rb->reached.WaitForNotificationWithTimeout(absl::Seconds(120)));
  rb->signals.stop.store(true);
  ASSERT_TRUE(rb->WaitUnlessFinished(hold->at_checkpoint));
  ExpectLeftIn({founder.get(), ra.get()}, *rb, rb->LastIteration());
  std::move(release).Invoke();
  rb->Join();
  EXPECT_TRUE(rb->result.ok()) << rb->result;
  EXPECT_TRUE(HasCheckpoint(dir_ + "/ckpt-b"));
  founder->signals.stop.store(true);
  ra->signals.stop.store(true);
  founder->Join();
  ra->Join();
  EXPECT_TRUE(founder->result.ok()) << founder->result;
  EXPECT_TRUE(ra->result.ok()) << ra->result;
}

// Holds each daemon given it in before_leave_recheck (Note [Simultaneous
// leavers]) until `n` of them got there: a true race, where every leaver
// signed its intent before any of them checks again.
struct RecheckBarrier {
  explicit RecheckBarrier(int n) : waiting(n) {}
  absl::Mutex mu;
  int waiting ABSL_GUARDED_BY(mu);
  bool All() const ABSL_SHARED_LOCKS_REQUIRED(mu) { return waiting <= 0; }
  void Install(GossipDaemonOptions& o) {
    o.before_leave_recheck = [this] {
      absl::MutexLock lock(&mu);
      --waiting;
      mu.AwaitWithTimeout(absl::Condition(this, &RecheckBarrier::All), absl::Seconds(60));
    };
  }
};

// Note [Simultaneous leavers]: b and b2, stage 2's two replicas, are
// drained at the same moment, each past its leave check before either
// checks again. Exactly one drain is accepted, the smaller node id's; the
// other is refused (FailedPrecondition), stays, and the swarm trains stage
// 2 on it with nothing dropped. Before, both drains passed (each saw the
// other alive) and the stage was left with no replica.
TEST_F(GossipDaemonStopTest, OfTwoReplicasDrainedAtOnceOnlyOneLeaves) {
  const GossipDaemonOptions d0 = Options("d0", {0});
  auto founder = LaunchFounder(d0, /*expect_members=*/4);
  ASSERT_NE(founder, nullptr);
  RecheckBarrier barrier(2);
  auto member = [&](const std::string& name, int stage, int64_t reach = -1) {
    GossipDaemonOptions o = Options(name, {stage});
    o.expect_members = 4;
    o.gossip.join = {founder->daemon->gossip_address()};
    o.stop_timeout = absl::Seconds(120);
    if (stage == 2) barrier.Install(o);
    return LaunchDaemon(o, reach);
  };
  auto a = member("a", 1);
  auto b = member("b", 2, /*reach=*/3);
  auto b2 = member("b2", 2);
  ASSERT_TRUE(a && b && b2);
  ASSERT_TRUE(b->reached.WaitForNotificationWithTimeout(absl::Seconds(120)));

  absl::Status drained_b, drained_b2;
  std::thread tb([&] { drained_b = b->daemon->RequestDrain(/*force=*/false); });
  std::thread tb2([&] { drained_b2 = b2->daemon->RequestDrain(/*force=*/false); });
  tb.join();
  tb2.join();
  EXPECT_NE(drained_b.ok(), drained_b2.ok())
      << "b: " << drained_b << "; b2: " << drained_b2 << " (both leaving loses stage 2)";
  const bool b_smaller = b->daemon->view().self < b2->daemon->view().self;
  RunningDaemon* leaver = b_smaller ? b.get() : b2.get();
  RunningDaemon* stayer = b_smaller ? b2.get() : b.get();
  const absl::Status& refused = b_smaller ? drained_b2 : drained_b;
  EXPECT_TRUE((b_smaller ? drained_b : drained_b2).ok()) << "the smaller node id leaves";
  EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;

  // The leaver ends; the swarm trains stage 2 on the one that stayed.
  ASSERT_TRUE(leaver->finished.WaitForNotificationWithTimeout(absl::Seconds(120)));
  leaver->Join();
  EXPECT_TRUE(leaver->result.ok()) << leaver->result;
  const int64_t next = founder->LastIteration() + 2;
  ASSERT_TRUE(founder->WaitForIteration(next, absl::Seconds(120)))
      << "training did not go on with stage 2 on the replica that stayed";
  {
    absl::MutexLock lock(&founder->mu);
    const NodeIterationReport& last = founder->reports.back();
    ASSERT_TRUE(last.data.has_value());
    EXPECT_EQ(last.data->dropped, 0);
    EXPECT_EQ(last.data->completed, d0.base.mbs_per_iteration);
  }
  EXPECT_FALSE(stayer->finished.HasBeenNotified()) << "the refused replica left";
  for (RunningDaemon* r : {founder.get(), a.get(), stayer}) r->signals.stop.store(true);
  for (RunningDaemon* r : {founder.get(), a.get(), stayer}) {
    r->Join();
    EXPECT_TRUE(r->result.ok()) << r->result;
  }
  std::printf("two drains at once: %s left, %s refused: %s\n",
              b_smaller ? "b" : "b2", b_smaller ? "b2" : "b",
              std::string(refused.message()).c_str());
}

// The member record `r` has in `peer`'s view (null if none).
std::optional<membership::MemberInfo> RecordIn(RunningDaemon& peer, RunningDaemon& r) {
  const std::string address = r.daemon->gossip_address();
  for (const membership::MemberInfo& m : peer.daemon->view().members) {
    if (std::find(m.addresses.begin(), m.addresses.end(), address) != m.addresses.end()) return m;
  }
  return std::nullopt;
}

// Note [Simultaneous leavers] on the stop path: b and b2, stage 2's two
// replicas, get a stop signal at the same moment, each held after its first
// leave check until both got there, and after signing its intent until both
// did (the drain race above holds only the latter: its drains check at the
// same instant; without the first hold, the later stop's first check saw
// the other's intent and both took the last replica's path).
// Exactly one, the smaller node id, signs LEFT at once; the other takes the
// last replica's path (record.stopping with its stop point, Note [Stopping
// last replica]; LEFT once its trainer ended). Both exit OK with a
// checkpoint. Checked at both final checkpoints, where both are LEFT in the
// founder's view and only the last replica's record says `stopping`.
TEST_F(GossipDaemonStopTest, OfTwoReplicasStoppedAtOnceOnlyOneLeavesAtOnce) {
  const GossipDaemonOptions d0 = Options("d0", {0});
  auto founder = LaunchFounder(d0, /*expect_members=*/4);
  ASSERT_NE(founder, nullptr);
  // Both past their first check before either signs (a stop's check runs
  // up to 100 ms after its signal), then both signed before either checks
  // again.
  RecheckBarrier intent(2), barrier(2);
  std::shared_ptr<CheckpointHold> hold_b, hold_b2;
  auto member = [&](const std::string& name, int stage, std::shared_ptr<CheckpointHold>* hold,
                    int64_t reach = -1) {
    GossipDaemonOptions o = Options(name, {stage});
    o.expect_members = 4;
    o.gossip.join = {founder->daemon->gossip_address()};
    if (hold != nullptr) {
      barrier.Install(o);
      GossipDaemonOptions first;
      intent.Install(first);
      o.before_leave_intent = std::move(first.before_leave_recheck);
      *hold = HoldFinalCheckpoint(o);
    }
    return LaunchDaemon(o, reach);
  };
  auto a = member("a", 1, nullptr);
  auto b = member("b", 2, &hold_b, /*reach=*/3);
  auto b2 = member("b2", 2, &hold_b2);
  ASSERT_TRUE(a && b && b2);
  absl::Cleanup release = [hold_b, hold_b2] {
    for (const auto& h : {hold_b, hold_b2}) {
      if (!h->release.HasBeenNotified()) h->release.Notify();
    }
  };
  ASSERT_TRUE(b->reached.WaitForNotificationWithTimeout(absl::Seconds(120)));

  b->signals.stop.store(true);
  b2->signals.stop.store(true);
  ASSERT_TRUE(b->WaitUnlessFinished(hold_b->at_checkpoint));
  ASSERT_TRUE(b2->WaitUnlessFinished(hold_b2->at_checkpoint));
  const std::optional<membership::MemberInfo> rb = RecordIn(*founder, *b),
                                              rb2 = RecordIn(*founder, *b2);
  ASSERT_TRUE(rb.has_value() && rb2.has_value());
  EXPECT_EQ(rb->state, proto::MEMBER_STATE_LEFT);
  EXPECT_EQ(rb2->state, proto::MEMBER_STATE_LEFT);
  EXPECT_NE(rb->stopping, rb2->stopping)
      << "b stopping: " << rb->stopping << ", b2 stopping: " << rb2->stopping
      << " (both leaving at once leaves their exit iteration no route)";
  const bool b_smaller = b->daemon->view().self < b2->daemon->view().self;
  const membership::MemberInfo& last = b_smaller ? *rb2 : *rb;
  EXPECT_TRUE(last.stopping) << "the larger node id takes the last replica's path";
  std::move(release).Invoke();
  for (RunningDaemon* r : {b.get(), b2.get()}) {
    r->Join();
    EXPECT_TRUE(r->result.ok()) << r->result;
  }
  EXPECT_TRUE(HasCheckpoint(dir_ + "/ckpt-b"));
  EXPECT_TRUE(HasCheckpoint(dir_ + "/ckpt-b2"));
  for (RunningDaemon* r : {founder.get(), a.get()}) r->signals.stop.store(true);
  for (RunningDaemon* r : {founder.get(), a.get()}) {
    r->Join();
    EXPECT_TRUE(r->result.ok()) << r->result;
  }
  std::printf("two stops at once: %s left at once, %s took the last replica's path "
              "(stop point %llu)\n",
              b_smaller ? "b" : "b2", b_smaller ? "b2" : "b",
              static_cast<unsigned long long>(last.stop_after));
}

}  // namespace
}  // namespace skipswarm::node
