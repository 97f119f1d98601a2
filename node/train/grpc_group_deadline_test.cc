// The gRPC replica group's deadlines: silent members (Note [Silent members]
// in grpc_group_sweep.cc), late members (Note [Late members] in
// sharded_reduce.h) and the flush before a leave (Note [Leaving with
// pushes owed] in grpc_group.cc), on the simulated clock.
#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/free_port.h"
#include "common/sim_clock.h"
#include "gtest/gtest.h"
#include "node/train/grpc_group.h"
#include "node/train/grpc_group_test_util.h"
#include "node/train/sharded_reduce.h"

namespace skipswarm::node {
namespace {

using common::NodeId;
using grpc_group_testing::BePatient;
using grpc_group_testing::SimDriver;
using grpc_group_testing::kPatience;
using grpc_group_testing::LoopbackGroups;
using grpc_group_testing::StartLoopbackGroups;

// Replica i's part of an outer sync with a 2 s deadline (Note [Late
// members]): nine entries of 1 + i.
GradientContribution OuterSyncPart(const NodeId& from, int i) {
  GradientContribution c;
  c.from = from;
  c.flat = std::vector<float>(9, 1.f + i);
  c.visits = 1;
  c.params_digest = 7;
  c.close_after = absl::Seconds(2);
  return c;
}

// One replica of stage 1 per id, 4 memory slots each.
std::vector<PeerInfo> StageOneReplicas(const std::vector<NodeId>& ids) {
  std::vector<PeerInfo> members;
  for (const NodeId& id : ids) members.push_back({id, {1}, 4, "", ""});
  return members;
}

// Two data nodes (stage 0): d1 states `stated` (if set) with its barrier
// message of iteration 0, both pass that barrier (a wait of ~0: the
// measured deadline is then the 30 s floor), and at iteration 1 only d0
// arrives. Returns when d0's barrier of iteration 1 ended, or at `until`
// from its arrival (nullopt: it still waits); `then` runs at `arrive_at`
// (d1 arrives). The clock moves in 500 ms steps.
struct StatedBoundRun {
  std::optional<absl::Duration> waited;  // d0's barrier of iteration 1
  bool d1_alive = false;                 // in d0's view, at the end
  absl::Status status;
};
StatedBoundRun RunStatedBound(std::optional<absl::Duration> stated, absl::Duration until,
                              std::optional<absl::Duration> arrive_at,
                              absl::Duration max_stated = GrpcGroupOptions{}.max_stated_bound) {
  common::SimClock clock;
  const std::vector<NodeId> ids = {NodeId::ForName("d0"), NodeId::ForName("d1")};
  std::vector<PeerInfo> members;
  for (const NodeId& id : ids) members.push_back({id, {0}, 4, "", ""});
  absl::StatusOr<LoopbackGroups> swarm = StartLoopbackGroups(
      members, &clock, [&](GrpcGroupOptions& o) { o.max_stated_bound = max_stated; });
  StatedBoundRun run;
  if (!swarm.ok()) {
    run.status = swarm.status();
    return run;
  }
  std::vector<std::unique_ptr<GrpcGroupComm>>& groups = swarm->groups;
  SimDriver sim(&clock);
  absl::Notification b0, b1;
  if (stated.has_value()) groups[1]->StateIterationBound(0, ids[1], *stated);
  groups[0]->Barrier(0, ids[0], true, [&](absl::Status) { b0.Notify(); });
  groups[1]->Barrier(0, ids[1], true, [&](absl::Status) { b1.Notify(); });
  if (!sim.Until(b0) || !sim.Until(b1)) {
    run.status = absl::DeadlineExceededError("the barrier of iteration 0 did not complete");
    return run;
  }
  absl::Notification late0, late1;
  const absl::Duration start = clock.SteadyNow();
  groups[0]->Barrier(1, ids[0], true, [&](absl::Status s) {
    run.status = s;
    run.waited = clock.SteadyNow() - start;
    late0.Notify();
  });
  if (arrive_at.has_value()) {
    sim.AdvanceTo(start + *arrive_at, absl::Milliseconds(500), &late0);
    if (!late0.HasBeenNotified()) {
      groups[1]->Barrier(1, ids[1], true, [&](absl::Status) { late1.Notify(); });
      sim.Until(late0);
    }
  } else {
    sim.AdvanceTo(start + until, absl::Milliseconds(500), &late0);
    sim.Until(late0);
  }
  run.d1_alive = swarm->views[0]->IsAlive(ids[1]);
  return run;
}

// Note [Stated pace]: two data nodes run `paced` iterations in which d1
// states `honest` and arrives `pace` after d0 (its span: `pace`); then d1
// states `last` (capped at `max_stated`) and goes silent at the next
// barrier. Returns how long d0's barrier waited for it (nullopt: still
// waiting at `until`). The clock moves in 500 ms steps.
std::optional<absl::Duration> RunPacedThenSilent(int paced, absl::Duration pace,
                                                 absl::Duration honest, absl::Duration last,
                                                 absl::Duration max_stated,
                                                 absl::Duration until, bool* d1_alive) {
  common::SimClock clock;
  const std::vector<NodeId> ids = {NodeId::ForName("d0"), NodeId::ForName("d1")};
  std::vector<PeerInfo> members;
  for (const NodeId& id : ids) members.push_back({id, {0}, 4, "", ""});
  absl::StatusOr<LoopbackGroups> swarm = StartLoopbackGroups(
      members, &clock, [&](GrpcGroupOptions& o) { o.max_stated_bound = max_stated; });
  if (!swarm.ok()) return std::nullopt;
  std::vector<std::unique_ptr<GrpcGroupComm>>& groups = swarm->groups;
  SimDriver sim(&clock);
  for (int i = 0; i <= paced; ++i) {
    const uint64_t it = static_cast<uint64_t>(i);
    absl::Notification b0, b1;
    groups[1]->StateIterationBound(it, ids[1], i < paced ? honest : last);
    groups[0]->Barrier(it, ids[0], true, [&](absl::Status) { b0.Notify(); });
    if (i > 0) sim.AdvanceTo(clock.SteadyNow() + pace, absl::Milliseconds(500));
    groups[1]->Barrier(it, ids[1], true, [&](absl::Status) { b1.Notify(); });
    if (!sim.Until(b0) || !sim.Until(b1)) return std::nullopt;
  }
  absl::Notification late;
  std::optional<absl::Duration> waited;
  const absl::Duration start = clock.SteadyNow();
  groups[0]->Barrier(static_cast<uint64_t>(paced) + 1, ids[0], true, [&](absl::Status) {
    waited = clock.SteadyNow() - start;
    late.Notify();
  });
  sim.AdvanceTo(start + until, absl::Milliseconds(500), &late);
  sim.Until(late);
  *d1_alive = swarm->views[0]->IsAlive(ids[1]);
  return waited;
}

// A link held up on purpose: not a death (probes may fail), and every
// push to every peer is retried.
void HoldUpLinks(GrpcGroupOptions& o) {
  o.probe_failures = 1000;
  o.retry_pushes_to = [](const NodeId&) { return true; };
  o.push_retries = 1000;
}

}  // namespace
}  // namespace skipswarm::node

namespace skipswarm::node {
namespace {

// Note [Silent members]: a replica that answers health probes but never
// sends its gradients is dropped from the averaging after a deadline that
// follows the measured waits (here: the 30 s floor, as the first round
// took milliseconds), instead of stalling its replica forever.
TEST(GrpcGroupSilentTest, AReplicaThatNeverSendsIsDroppedAfterTheMeasuredDeadline) {
  common::SimClock clock;
  std::vector<NodeId> ids = {NodeId::ForName("s0"), NodeId::ForName("s1"),
                             NodeId::ForName("s2")};
  std::vector<PeerInfo> members;
  const std::vector<int> stages = {0, 1, 1};
  for (int i = 0; i < 3; ++i) members.push_back({ids[i], {stages[i]}, 4, "", ""});
  absl::StatusOr<LoopbackGroups> swarm = StartLoopbackGroups(members, &clock);
  ASSERT_TRUE(swarm.ok()) << swarm.status();
  std::vector<std::unique_ptr<StaticSwarmView>>& views = swarm->views;
  std::vector<std::unique_ptr<GrpcGroupComm>>& groups = swarm->groups;
  SimDriver sim(&clock);

  // Round 0: both replicas send; it completes with time standing still.
  std::optional<absl::StatusOr<ReduceResult>> r1, r2;
  absl::Notification d1, d2;
  groups[1]->AllReduce(0, 1, {ids[1], std::vector<float>(8, 1.f), 1, 7, nullptr},
                       [&](absl::StatusOr<ReduceResult> r) { r1 = r; d1.Notify(); });
  groups[2]->AllReduce(0, 1, {ids[2], std::vector<float>(8, 2.f), 1, 7, nullptr},
                       [&](absl::StatusOr<ReduceResult> r) { r2 = r; d2.Notify(); });
  ASSERT_TRUE(sim.Until(d1));
  ASSERT_TRUE(sim.Until(d2));
  ASSERT_TRUE(r1->ok() && r2->ok());
  EXPECT_EQ((*r1)->contributors, 2);

  // Round 1: s2 stays alive (its server answers probes) but sends nothing.
  std::optional<absl::StatusOr<ReduceResult>> r3;
  absl::Notification d3;
  const absl::Duration start = clock.SteadyNow();
  groups[1]->AllReduce(1, 1, {ids[1], std::vector<float>(8, 1.f), 1, 7, nullptr},
                       [&](absl::StatusOr<ReduceResult> r) { r3 = r; d3.Notify(); });
  sim.AdvanceTo(start + absl::Minutes(10), absl::Milliseconds(500), &d3);
  ASSERT_TRUE(sim.Until(d3)) << "the silent replica stalled the averaging";
  const absl::Duration waited = clock.SteadyNow() - start;
  ASSERT_TRUE(r3->ok()) << r3->status();
  EXPECT_EQ((*r3)->contributors, 1);
  EXPECT_GE(waited, absl::Seconds(30));
  EXPECT_LE(waited, absl::Seconds(40));
  EXPECT_FALSE(views[1]->IsAlive(ids[2]));
}

// Note [Silent members]: the wait of a round that ended by dropping a
// silent member is not a sample of how long rounds take. It lasted the
// deadline itself, so counting it made the next deadline factor x longer
// at every drop: a second silent replica stalled its stage 2 minutes, a
// third 8. Here s2 is silent in stage 1's round 1, then s3 in stage 2's
// round 2 (s1 hosts both stages); both are dropped after the 30 s floor.
// Four replica-group members over loopback gRPC on a simulated clock:
// s1 hosts stages 1 and 2, with s2 in stage 1 and s3 in stage 2, so one
// member's rounds show what a silent peer in each stage costs.
class TwoStageGroups {
 public:
  absl::Status Start() {
    ids_ = {NodeId::ForName("s0"), NodeId::ForName("s1"), NodeId::ForName("s2"),
            NodeId::ForName("s3")};
    const std::vector<std::vector<int>> stages = {{0}, {1, 2}, {1}, {2}};
    std::vector<PeerInfo> members;
    for (int i = 0; i < 4; ++i) members.push_back({ids_[i], stages[i], 4, "", ""});
    absl::StatusOr<LoopbackGroups> swarm = StartLoopbackGroups(members, &clock_);
    if (!swarm.ok()) return swarm.status();
    swarm_ = std::move(*swarm);
    return absl::OkStatus();
  }
  GradientContribution Contribution(int i) const {
    return GradientContribution{ids_[i], std::vector<float>(8, 1.f + i), 1, 7, nullptr};
  }
  GrpcGroupComm& group(int i) { return *swarm_.groups[i]; }
  bool IsAlive(int viewer, int peer) { return swarm_.views[viewer]->IsAlive(ids_[peer]); }
  common::SimClock& clock() { return clock_; }
  SimDriver& sim() { return sim_; }

  // s1 sends its part of `round` of `stage`, whose other member sends
  // nothing; runs the clock up to 10 min. The result (empty if the round
  // never ended) and how long it took.
  std::pair<std::optional<absl::StatusOr<ReduceResult>>, absl::Duration> SilentRound(
      uint64_t round, int stage) {
    std::optional<absl::StatusOr<ReduceResult>> result;
    absl::Notification done;
    const absl::Duration start = clock_.SteadyNow();
    group(1).AllReduce(round, stage, Contribution(1), [&](absl::StatusOr<ReduceResult> r) {
      result = std::move(r);
      done.Notify();
    });
    sim_.AdvanceTo(start + absl::Minutes(10), absl::Milliseconds(500), &done);
    if (!sim_.Until(done)) return {std::nullopt, clock_.SteadyNow() - start};
    return {std::move(result), clock_.SteadyNow() - start};
  }

 private:
  common::SimClock clock_;
  SimDriver sim_{&clock_};
  std::vector<NodeId> ids_;
  LoopbackGroups swarm_;
};

TEST(GrpcGroupSilentTest, ADropForSilenceDoesNotLengthenTheNextDeadline) {
  TwoStageGroups g;
  ASSERT_TRUE(g.Start().ok());
  // Round 0, stage 1: s1 and s2 send, with time standing still.
  absl::Notification a0, b0;
  g.group(1).AllReduce(0, 1, g.Contribution(1), [&](absl::StatusOr<ReduceResult>) { a0.Notify(); });
  g.group(2).AllReduce(0, 1, g.Contribution(2), [&](absl::StatusOr<ReduceResult>) { b0.Notify(); });
  ASSERT_TRUE(g.sim().Until(a0));
  ASSERT_TRUE(g.sim().Until(b0));
  // Round 1, stage 1: s2 answers probes but sends nothing.
  auto [a1, waited1] = g.SilentRound(1, 1);
  ASSERT_TRUE(a1.has_value()) << "the silent replica stalled the averaging";
  ASSERT_TRUE(a1->ok()) << a1->status();
  EXPECT_EQ((**a1).contributors, 1);
  EXPECT_LE(waited1, absl::Seconds(40));
  // Round 2, stage 2: s3 is silent the same way.
  auto [a2, waited] = g.SilentRound(2, 2);
  ASSERT_TRUE(a2.has_value()) << "the silent replica stalled the averaging";
  ASSERT_TRUE(a2->ok()) << a2->status();
  EXPECT_EQ((**a2).contributors, 1);
  EXPECT_GE(waited, absl::Seconds(30));
  EXPECT_LE(waited, absl::Seconds(40)) << "the first drop lengthened the deadline";
  EXPECT_FALSE(g.IsAlive(1, 3));
}

// Note [Silent ceiling] (silent_deadline.h): a round that completed after
// a long wait (s2 held 290 s, just under the initial 5 min, then sent)
// made the slowest-wait rule wait 4 x that, 19 min, for the next silent
// replica (s3, stage 2). The deadline never exceeds the initial 5 min.
TEST(GrpcGroupSilentTest, ALongCompletedWaitDoesNotStretchTheNextDeadline) {
  TwoStageGroups g;
  ASSERT_TRUE(g.Start().ok());
  // Round 0, stage 1: s1 sends; s2 sends 290 s later (held, then resumed).
  std::optional<absl::StatusOr<ReduceResult>> a0;
  absl::Notification d0, b0;
  const absl::Duration start = g.clock().SteadyNow();
  g.group(1).AllReduce(0, 1, g.Contribution(1),
                       [&](absl::StatusOr<ReduceResult> r) { a0 = r; d0.Notify(); });
  g.sim().AdvanceTo(start + absl::Seconds(290), absl::Milliseconds(500), &d0);
  ASSERT_FALSE(d0.HasBeenNotified());
  g.group(2).AllReduce(0, 1, g.Contribution(2), [&](absl::StatusOr<ReduceResult>) { b0.Notify(); });
  ASSERT_TRUE(g.sim().Until(d0));
  ASSERT_TRUE(g.sim().Until(b0));
  ASSERT_TRUE(a0->ok()) << a0->status();
  EXPECT_EQ((*a0)->contributors, 2);
  // Round 1, stage 2: s3 answers probes but sends nothing.
  auto [a1, waited] = g.SilentRound(1, 2);
  ASSERT_TRUE(a1.has_value()) << "the silent replica held the averaging past 10 min";
  ASSERT_TRUE(a1->ok()) << a1->status();
  EXPECT_EQ((**a1).contributors, 1);
  EXPECT_GE(waited, absl::Minutes(5));
  EXPECT_LE(waited, absl::Minutes(5) + absl::Seconds(10));
  EXPECT_FALSE(g.IsAlive(1, 3));
}

}  // namespace
}  // namespace skipswarm::node

namespace skipswarm::node {
namespace {

// Note [Late members] (sharded_reduce.h) over gRPC: an outer sync whose
// third replica has not sent anything closes at its 2 s deadline (simulated)
// with the two that did, without marking the third dead; the third, when it
// gets there, finds the closed round's reduced shards waiting and is done
// at once with their average, flagged late.
TEST(GrpcGroupLateTest, ARoundClosesAtItsDeadlineAndTheLateReplicaGetsTheAverage) {
  common::SimClock clock;
  std::vector<NodeId> ids = {NodeId::ForName("l0"), NodeId::ForName("l1"),
                             NodeId::ForName("l2")};
  std::sort(ids.begin(), ids.end());
  const std::vector<PeerInfo> members = StageOneReplicas(ids);
  absl::StatusOr<LoopbackGroups> swarm = StartLoopbackGroups(members, &clock);
  ASSERT_TRUE(swarm.ok()) << swarm.status();
  std::vector<std::unique_ptr<StaticSwarmView>>& views = swarm->views;
  std::vector<std::unique_ptr<GrpcGroupComm>>& groups = swarm->groups;
  SimDriver sim(&clock);
  auto contribution = [&](int i) { return OuterSyncPart(ids[i], i); };
  std::optional<absl::StatusOr<ReduceResult>> r0, r1, r2;
  absl::Notification d0, d1, d2;
  const absl::Duration start = clock.SteadyNow();
  groups[0]->AllReduce(0, 1, contribution(0),
                       [&](absl::StatusOr<ReduceResult> r) { r0 = r; d0.Notify(); });
  groups[1]->AllReduce(0, 1, contribution(1),
                       [&](absl::StatusOr<ReduceResult> r) { r1 = r; d1.Notify(); });
  // The parts of 0 and 1 cross loopback before time moves to the deadline
  // (one that missed it would be late too): each one's part of the other's
  // shard, and both parts of 2's shard (held until 2 gets there).
  ASSERT_TRUE(sim.Until([&] {
    return groups[0]->messages_received() >= 1 && groups[1]->messages_received() >= 1 &&
           groups[2]->messages_received() >= 2;
  }));
  EXPECT_FALSE(d0.HasBeenNotified() || d1.HasBeenNotified()) << "closed before its deadline";
  // Time goes to the first re-check past the deadline (2 s are not past
  // it), where 0 and 1 close 2 out and redo the round between them, and
  // stands still while the redone round's parts cross (the redone round
  // has a deadline of its own; the next case checks it).
  sim.AdvanceTo(start + absl::Seconds(2) + GrpcGroupOptions().recheck, absl::Milliseconds(5));
  ASSERT_TRUE(sim.Until(d0));
  ASSERT_TRUE(sim.Until(d1));
  const absl::Duration waited = clock.SteadyNow() - start;
  ASSERT_TRUE(r0->ok() && r1->ok()) << r0->status() << " " << r1->status();
  EXPECT_EQ((*r0)->contributors, 2);
  EXPECT_EQ((*r0)->sum, std::vector<float>(9, 3.f));
  EXPECT_EQ((*r0)->left_out, std::vector<NodeId>{ids[2]});
  EXPECT_FALSE((*r0)->late);
  EXPECT_EQ((*r1)->sum, (*r0)->sum);
  EXPECT_GE(waited, absl::Seconds(2));
  EXPECT_LT(waited, absl::Seconds(25));  // not the silent-member deadline
  EXPECT_TRUE(views[0]->IsAlive(ids[2]));

  groups[2]->AllReduce(0, 1, contribution(2),
                       [&](absl::StatusOr<ReduceResult> r) { r2 = r; d2.Notify(); });
  ASSERT_TRUE(sim.Until(d2));
  ASSERT_TRUE(r2->ok()) << r2->status();
  EXPECT_TRUE((*r2)->late);
  EXPECT_EQ((*r2)->sum, (*r0)->sum);
  EXPECT_EQ((*r2)->contributors, 2);
}

// Note [Late members]: after l0 and l1 close l2 out at the 2 s deadline,
// they redo the round between them, and their parts must cross again. l1's
// part to l0 is held up (its address of l0 refuses connections; its pushes
// are retried). The redone round gets the whole deadline again: l0 must
// not close l1 out of it at its next re-check (it did, with the deadline
// the first round had spent: over a WAN, where a part takes longer than a
// re-check to cross, each survivor then averaged alone). Only once the
// redone round's own deadline has passed is l1 late too.
TEST(GrpcGroupLateTest, TheRoundRedoneAfterACloseGetsTheWholeDeadlineAgain) {
  common::SimClock clock;
  std::vector<NodeId> ids = {NodeId::ForName("l0"), NodeId::ForName("l1"),
                             NodeId::ForName("l2")};
  std::sort(ids.begin(), ids.end());
  const std::vector<PeerInfo> members = StageOneReplicas(ids);
  absl::StatusOr<LoopbackGroups> swarm =
      StartLoopbackGroups(members, &clock, HoldUpLinks);
  ASSERT_TRUE(swarm.ok()) << swarm.status();
  std::vector<std::unique_ptr<StaticSwarmView>>& views = swarm->views;
  std::vector<std::unique_ptr<GrpcGroupComm>>& groups = swarm->groups;
  SimDriver sim(&clock);
  auto contribution = [&](int i) { return OuterSyncPart(ids[i], i); };
  std::optional<absl::StatusOr<ReduceResult>> r0;
  absl::Notification d0;
  const absl::Duration start = clock.SteadyNow();
  groups[0]->AllReduce(0, 1, contribution(0),
                       [&](absl::StatusOr<ReduceResult> r) { r0 = r; d0.Notify(); });
  groups[1]->AllReduce(0, 1, contribution(1), [](absl::StatusOr<ReduceResult>) {});
  ASSERT_TRUE(sim.Until([&] {
    return groups[0]->messages_received() >= 1 && groups[1]->messages_received() >= 1 &&
           groups[2]->messages_received() >= 2;
  }));
  absl::StatusOr<int> refused = common::FreeLoopbackPort();
  ASSERT_TRUE(refused.ok()) << refused.status();
  views[1]->SetAddresses(ids[0], "", "127.0.0.1:" + std::to_string(*refused));
  // The close, then re-checks until just before the redone round's own
  // deadline, with l1's part held up.
  const absl::Duration closed = start + absl::Seconds(2) + GrpcGroupOptions().recheck;
  sim.AdvanceTo(closed, absl::Milliseconds(5));
  sim.AdvanceTo(closed + absl::Seconds(2) - GrpcGroupOptions().recheck, absl::Milliseconds(5),
                &d0);
  ASSERT_FALSE(d0.HasBeenNotified())
      << "l0 closed l1 out of the redone round before its deadline: "
      << (r0->ok() ? absl::StrCat((*r0)->contributors, " contributor(s)")
                   : r0->status().ToString());
  sim.AdvanceTo(closed + absl::Seconds(2) + 2 * GrpcGroupOptions().recheck,
                absl::Milliseconds(5), &d0);
  ASSERT_TRUE(sim.Until(d0));
  ASSERT_TRUE(r0->ok()) << r0->status();
  EXPECT_EQ((*r0)->contributors, 1);
  std::vector<NodeId> out = (*r0)->left_out;
  std::sort(out.begin(), out.end());
  EXPECT_EQ(out, (std::vector<NodeId>{ids[1], ids[2]}));
}

// Note [Refused late pushes] (grpc_group_push.cc): of two replicas, l1 is
// closed out of the outer sync of iteration 7 and gets there when l0 has
// reached iteration 12: it is done at once with l0's average, flagged
// late, and its own parts of round 7 reach l0 long over and are refused.
// That refusal must not mark l0 dead on l1 (it did, and l1 then averaged
// alone, apart from l0): the next sync (15) is averaged by both, with the
// same sum.
TEST(GrpcGroupLateTest, ALateReplicasRefusedPartsDoNotDropItsPeer) {
  common::SimClock clock;
  std::vector<NodeId> ids = {NodeId::ForName("l0"), NodeId::ForName("l1")};
  const std::vector<PeerInfo> members = StageOneReplicas(ids);
  absl::StatusOr<LoopbackGroups> swarm = StartLoopbackGroups(members, &clock);
  ASSERT_TRUE(swarm.ok()) << swarm.status();
  std::vector<std::unique_ptr<StaticSwarmView>>& views = swarm->views;
  std::vector<std::unique_ptr<GrpcGroupComm>>& groups = swarm->groups;
  SimDriver sim(&clock);
  auto contribution = [&](int i) { return OuterSyncPart(ids[i], i); };
  // Round 7: l0 closes l1 out at its 2 s deadline and averages alone.
  std::optional<absl::StatusOr<ReduceResult>> a0, a1, b0, b1;
  absl::Notification da0, da1, db0, db1, barrier;
  const absl::Duration start = clock.SteadyNow();
  groups[0]->AllReduce(7, 1, contribution(0),
                       [&](absl::StatusOr<ReduceResult> r) { a0 = r; da0.Notify(); });
  sim.AdvanceTo(start + absl::Seconds(2) + GrpcGroupOptions().recheck, absl::Milliseconds(10),
                &da0);
  ASSERT_TRUE(sim.Until(da0));
  ASSERT_TRUE(a0->ok()) << a0->status();
  EXPECT_EQ((*a0)->left_out, std::vector<NodeId>{ids[1]});
  // l0 trains on (no data nodes here: its barrier passes at once).
  groups[0]->Barrier(12, ids[0], /*data_node=*/false, [&](absl::Status) { barrier.Notify(); });
  ASSERT_TRUE(sim.Until(barrier));
  // The closed round's reduced shard (9 floats) reaches l1 before l1 gets
  // there (held with l0's part of the full round).
  ASSERT_TRUE(sim.Until([&] { return groups[1]->early_bytes() >= 9 * sizeof(float); }))
      << groups[1]->early_bytes();
  // l1 reaches round 7: done at once, late; its parts of it go to l0,
  // which refuses them as long over.
  groups[1]->AllReduce(7, 1, contribution(1),
                       [&](absl::StatusOr<ReduceResult> r) { a1 = r; da1.Notify(); });
  ASSERT_TRUE(sim.Until(da1));
  ASSERT_TRUE(a1->ok()) << a1->status();
  EXPECT_TRUE((*a1)->late);
  EXPECT_EQ((*a1)->sum, (*a0)->sum);
  // l1 trains on to 14 before round 15, as l0 did to 12: a push more than
  // 2 iterations ahead of a node is refused (Note [Push admission]), and
  // l0's part of 15 could reach l1 while l1 was still at 7 (seen once
  // under load: refused, and with time standing still round 15 never
  // ended).
  absl::Notification l1_trained;
  groups[1]->Barrier(14, ids[1], /*data_node=*/false, [&](absl::Status) { l1_trained.Notify(); });
  ASSERT_TRUE(sim.Until(l1_trained));
  // Round 15: l1's pushes to l0 go after its round-7 ones on the same push
  // thread, so when round 15 is done the refusal has been handled. Time
  // stands still: the round can only end with both, or with l1 alone if
  // it dropped l0.
  groups[0]->AllReduce(15, 1, contribution(0),
                       [&](absl::StatusOr<ReduceResult> r) { b0 = r; db0.Notify(); });
  groups[1]->AllReduce(15, 1, contribution(1),
                       [&](absl::StatusOr<ReduceResult> r) { b1 = r; db1.Notify(); });
  ASSERT_TRUE(sim.Until(db1));
  EXPECT_TRUE(views[1]->IsAlive(ids[0]));
  ASSERT_TRUE(b1->ok()) << b1->status();
  ASSERT_EQ((*b1)->contributors, 2) << "l1 averaged without l0";
  ASSERT_TRUE(sim.Until(db0));
  EXPECT_GE(groups[0]->pushes_refused(), 1u);
  ASSERT_TRUE(b0->ok()) << b0->status();
  EXPECT_EQ((*b0)->contributors, 2);
  EXPECT_EQ((*b0)->sum, std::vector<float>(9, 3.f));
  EXPECT_EQ((*b1)->sum, (*b0)->sum);
  EXPECT_TRUE((*b0)->left_out.empty() && (*b1)->left_out.empty());
}

// Note [Leaving with pushes owed] (grpc_group.cc): l0 closes l1 out of an
// outer sync and is done; the round's result it owes l1 cannot cross yet
// (l0's address of l1 refuses connections; its pushes are retried). l0's
// flush before it leaves must wait for that push, retries included: once
// it returns l0 exits, and l1, getting to the round, must still end on
// l0's average (it waited for l0 in vain, then redid the round alone).
TEST(GrpcGroupFlushTest, ALeaverWaitsForTheResultItOwesALatePeer) {
  common::SimClock clock;
  std::vector<NodeId> ids = {NodeId::ForName("l0"), NodeId::ForName("l1")};
  const std::vector<PeerInfo> members = StageOneReplicas(ids);
  // Counts the failed pushes that are to be retried: the retry's timer
  // starts when the first attempt has failed, which takes real time.
  std::atomic<int> failed_pushes{0};
  absl::StatusOr<LoopbackGroups> swarm =
      StartLoopbackGroups(members, &clock, [&failed_pushes](GrpcGroupOptions& o) {
        HoldUpLinks(o);
        o.retry_pushes_to = [&failed_pushes](const NodeId&) {
          failed_pushes.fetch_add(1);
          return true;
        };
      });
  ASSERT_TRUE(swarm.ok()) << swarm.status();
  std::vector<std::unique_ptr<StaticSwarmView>>& views = swarm->views;
  std::vector<std::unique_ptr<GrpcGroupComm>>& groups = swarm->groups;
  SimDriver sim(&clock);
  absl::StatusOr<int> refused = common::FreeLoopbackPort();
  ASSERT_TRUE(refused.ok()) << refused.status();
  const std::string l1_address = "127.0.0.1:" + std::to_string(groups[1]->port());
  views[0]->SetAddresses(ids[1], "", "127.0.0.1:" + std::to_string(*refused));
  std::optional<absl::StatusOr<ReduceResult>> r0, r1;
  absl::Notification d0, d1, flushed;
  const absl::Duration start = clock.SteadyNow();
  groups[0]->AllReduce(0, 1, OuterSyncPart(ids[0], 0),
                       [&](absl::StatusOr<ReduceResult> r) { r0 = r; d0.Notify(); });
  sim.AdvanceTo(start + absl::Seconds(2) + GrpcGroupOptions().recheck, absl::Milliseconds(10),
                &d0);
  ASSERT_TRUE(sim.Until(d0));
  ASSERT_TRUE(r0->ok()) << r0->status();
  ASSERT_EQ((*r0)->left_out, std::vector<NodeId>{ids[1]});
  bool all_went = false;
  std::thread leaver([&] {
    all_went = groups[0]->FlushPushes(kPatience);
    flushed.Notify();
  });
  // Time stands still: the retry cannot fire, so nothing owed can go.
  EXPECT_FALSE(flushed.WaitForNotificationWithTimeout(absl::Milliseconds(50)))
      << "the flush did not wait for the closed round's result";
  // Time moves only once the first attempt has failed: its retry timer
  // starts then, which takes real time (a slow connect under TSan). The
  // timer is set just after the count, so time moves one retry period at a
  // time, with real time between for the retried push to cross, until the
  // flush ends: a timer set after one step fires in the next.
  ASSERT_TRUE(sim.Until([&] { return failed_pushes.load() >= 1; }));
  views[0]->SetAddresses(ids[1], "", l1_address);
  for (int period = 0; period < 100 && !flushed.HasBeenNotified(); ++period) {
    sim.AdvanceTo(clock.SteadyNow() + GrpcGroupOptions().push_retry_every,
                  absl::Milliseconds(10), &flushed);
    flushed.WaitForNotificationWithTimeout(absl::Milliseconds(100));  // real time: loopback
  }
  const bool flush_ended = sim.Until(flushed);
  if (!flush_ended) {  // the flush gives up after kPatience of clock time
    sim.AdvanceTo(clock.SteadyNow() + 2 * kPatience, absl::Seconds(1), &flushed);
  }
  leaver.join();
  ASSERT_TRUE(flush_ended) << "the flush did not end once l1 could be reached";
  EXPECT_TRUE(all_went);
  // l0 exits (a leaver stays a member through its exit iteration, Note
  // [Leaving] in training_members.h); l1 gets to the round after that.
  groups[0].reset();
  groups[1]->AllReduce(0, 1, OuterSyncPart(ids[1], 1),
                       [&](absl::StatusOr<ReduceResult> r) { r1 = r; d1.Notify(); });
  ASSERT_TRUE(sim.Until(d1)) << "l1 never got the result of the round that closed it out";
  ASSERT_TRUE(r1->ok()) << r1->status();
  EXPECT_TRUE((*r1)->late) << "l1 redid the round alone";
  EXPECT_EQ((*r1)->sum, (*r0)->sum);
}

// Note [Leaving with pushes owed]: the flush waits only for pushes of
// rounds this node finished, to members its view calls alive. l1 refuses
// l0's connections (retried, rarely, so that no retry ends a push here).
// While l0's round is open its parts are not owed: the flush returns at
// once. Once l0 closed l1 out, the result is owed, until l0's view gives
// up on l1: the waiting flush then returns at its next re-check.
TEST(GrpcGroupFlushTest, ALeaverDoesNotWaitForOpenRoundsOrPeersItsViewGaveUpOn) {
  common::SimClock clock;
  std::vector<NodeId> ids = {NodeId::ForName("l0"), NodeId::ForName("l1")};
  const std::vector<PeerInfo> members = StageOneReplicas(ids);
  absl::StatusOr<LoopbackGroups> swarm =
      StartLoopbackGroups(members, &clock, [](GrpcGroupOptions& o) {
        HoldUpLinks(o);
        o.push_retry_every = absl::Seconds(30);
      });
  ASSERT_TRUE(swarm.ok()) << swarm.status();
  std::vector<std::unique_ptr<StaticSwarmView>>& views = swarm->views;
  std::vector<std::unique_ptr<GrpcGroupComm>>& groups = swarm->groups;
  SimDriver sim(&clock);
  absl::StatusOr<int> refused = common::FreeLoopbackPort();
  ASSERT_TRUE(refused.ok()) << refused.status();
  views[0]->SetAddresses(ids[1], "", "127.0.0.1:" + std::to_string(*refused));
  std::optional<absl::StatusOr<ReduceResult>> r0;
  absl::Notification d0, flushed;
  const absl::Duration start = clock.SteadyNow();
  groups[0]->AllReduce(0, 1, OuterSyncPart(ids[0], 0),
                       [&](absl::StatusOr<ReduceResult> r) { r0 = r; d0.Notify(); });
  // Its part of l1's shard has failed once (a retry is due in 30 s).
  ASSERT_TRUE(sim.Until([&] { return groups[0]->pushed_bytes() > 0; }));
  bool all_went = false;
  std::thread open_round([&] {
    all_went = groups[0]->FlushPushes(kPatience);
    flushed.Notify();
  });
  ASSERT_TRUE(sim.Until(flushed)) << "the flush waited for a round l0 did not finish";
  open_round.join();
  EXPECT_TRUE(all_went);
  EXPECT_FALSE(d0.HasBeenNotified());

  sim.AdvanceTo(start + absl::Seconds(2) + GrpcGroupOptions().recheck, absl::Milliseconds(10),
                &d0);
  ASSERT_TRUE(sim.Until(d0));
  ASSERT_TRUE(r0->ok()) << r0->status();
  ASSERT_EQ((*r0)->left_out, std::vector<NodeId>{ids[1]});
  absl::Notification flushed_again;
  all_went = false;
  std::thread closed_round([&] {
    all_went = groups[0]->FlushPushes(kPatience);
    flushed_again.Notify();
  });
  EXPECT_FALSE(flushed_again.WaitForNotificationWithTimeout(absl::Milliseconds(50)))
      << "the flush did not wait for the closed round's result";
  views[0]->MarkDead(ids[1]);
  sim.AdvanceTo(clock.SteadyNow() + 2 * GrpcGroupOptions().recheck, absl::Milliseconds(10),
                &flushed_again);
  ASSERT_TRUE(sim.Until(flushed_again)) << "the flush waited for a peer l0's view gave up on";
  closed_round.join();
  EXPECT_TRUE(all_went);
}

}  // namespace
}  // namespace skipswarm::node

namespace skipswarm::node {
namespace {

// Note [Stated bounds in the daemons]: a live data node that stated a 60 s
// bound and arrives 100 s after its peer (past the 30 s measured deadline,
// within 2 x 60 s of its release) is waited for, not dropped: the measured
// rule alone dropped it at 30 s and it lost the iteration's work.
TEST(GrpcGroupStatedBoundTest, ALiveDataNodeWithinItsStatedBoundIsKept) {
  const StatedBoundRun run =
      RunStatedBound(absl::Seconds(60), absl::Minutes(10), absl::Seconds(100));
  ASSERT_TRUE(run.waited.has_value()) << run.status;
  EXPECT_TRUE(run.status.ok()) << run.status;
  EXPECT_GE(*run.waited, absl::Seconds(100));
  EXPECT_TRUE(run.d1_alive) << "dropped after " << *run.waited;
}

// A data node that states a bound and goes silent past it is dropped once
// both rules passed: 2 x 20 s = 40 s, after the 30 s measured deadline.
TEST(GrpcGroupStatedBoundTest, ADataNodeSilentPastItsStatedBoundIsDropped) {
  const StatedBoundRun run = RunStatedBound(absl::Seconds(20), absl::Minutes(10), std::nullopt);
  ASSERT_TRUE(run.waited.has_value()) << "the silent data node stalled the barrier";
  EXPECT_TRUE(run.status.ok()) << run.status;
  EXPECT_GE(*run.waited, absl::Seconds(40));
  EXPECT_LE(*run.waited, absl::Seconds(45));
  EXPECT_FALSE(run.d1_alive);
}

// A stated bound is a peer's word: one of 10 hours counts as the group's
// cap (here 1 minute), so a silent data node holds the barrier at most
// 2 x the cap.
TEST(GrpcGroupStatedBoundTest, AHugeStatedBoundIsCapped) {
  const StatedBoundRun run =
      RunStatedBound(absl::Hours(10), absl::Minutes(30), std::nullopt, absl::Minutes(1));
  ASSERT_TRUE(run.waited.has_value()) << "the huge statement held the barrier";
  EXPECT_GE(*run.waited, absl::Minutes(2));
  EXPECT_LE(*run.waited, absl::Minutes(2) + absl::Seconds(5));
  EXPECT_FALSE(run.d1_alive);
}

// A data node that never stated (an older peer, a joiner before its first
// barrier) keeps the measured rule: dropped at the 30 s deadline, not
// waited for forever.
TEST(GrpcGroupStatedBoundTest, ADataNodeThatNeverStatedKeepsTheMeasuredRule) {
  const StatedBoundRun run = RunStatedBound(std::nullopt, absl::Minutes(10), std::nullopt);
  ASSERT_TRUE(run.waited.has_value()) << "the silent data node stalled the barrier";
  EXPECT_GE(*run.waited, absl::Seconds(30));
  EXPECT_LE(*run.waited, absl::Seconds(35));
  EXPECT_FALSE(run.d1_alive);
}

// Note [Stated pace]: a data node whose iterations took ~5 s, that then
// states the cap (40 min) and goes silent, counts as stating 20 x 5 s =
// 100 s: the barrier drops it 2 x 100 s after its release, not after
// 2 x 40 min.
TEST(GrpcGroupStatedBoundTest, AFastDataNodeStatingTheCapIsDroppedAtItsPace) {
  bool d1_alive = true;
  const std::optional<absl::Duration> waited =
      RunPacedThenSilent(/*paced=*/6, absl::Seconds(5), /*honest=*/absl::Seconds(25),
                         /*last=*/absl::Minutes(40), /*max_stated=*/absl::Minutes(40),
                         /*until=*/absl::Minutes(100), &d1_alive);
  ASSERT_TRUE(waited.has_value()) << "the silent data node held the barrier 100 min";
  EXPECT_GE(*waited, absl::Seconds(195));
  EXPECT_LE(*waited, absl::Seconds(205));
  EXPECT_FALSE(d1_alive);
}

// A statement within the pace counts whole: 60 s (under 20 x 5 s) keeps
// the silent data node 2 x 60 s after its release, past the measured 30 s.
TEST(GrpcGroupStatedBoundTest, AStatementWithinThePaceCountsWhole) {
  bool d1_alive = true;
  const std::optional<absl::Duration> waited =
      RunPacedThenSilent(/*paced=*/6, absl::Seconds(5), /*honest=*/absl::Seconds(25),
                         /*last=*/absl::Seconds(60), /*max_stated=*/absl::Minutes(40),
                         /*until=*/absl::Minutes(10), &d1_alive);
  ASSERT_TRUE(waited.has_value());
  EXPECT_GE(*waited, absl::Seconds(115));
  EXPECT_LE(*waited, absl::Seconds(125));
  EXPECT_FALSE(d1_alive);
}

}  // namespace
}  // namespace skipswarm::node
