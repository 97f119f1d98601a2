#include "node/daemon/gossip/behind_check.h"

#include <cstddef>
#include <limits>
#include <ostream>
#include <utility>
#include <vector>

#include "common/sim_clock.h"
#include "gtest/gtest.h"

namespace skipswarm::node {

// gtest's names for verdicts (found by argument-dependent lookup).
void PrintTo(const BehindVerdict& v, std::ostream* os) {
  *os << (v.kind == BehindVerdict::kReenter ? "re-enter at " : "move ahead to ") << v.at;
}

namespace {

using Answers = std::vector<absl::StatusOr<uint64_t>>;

std::optional<BehindVerdict> Verdict(BehindVerdict::Kind kind, uint64_t at) {
  return BehindVerdict{kind, at};
}

// Note [Revived members], as the chaos soak found it: a stage-1 replica
// SIGSTOPped for 5 s came back at iteration 372 while its replica was at
// 381. Asked once a second, on the simulated clock.
TEST(BehindCheckTest, AReplicaMoreThanTheLeadAheadMeansBehindOnceASecond) {
  common::SimClock clock;
  BehindCheck check({absl::Seconds(1), 4}, &clock);
  int asked = 0;
  Answers answers = {uint64_t{373}};
  const BehindCheck::Query query = [&] {
    ++asked;
    return answers;
  };
  const BehindCheck::Query data = [] { return Answers{uint64_t{373}}; };
  // In step (a replica one iteration on, as replicas of a stage are).
  EXPECT_EQ(check.Poll(372, query, data), std::nullopt);
  EXPECT_EQ(asked, 1);
  // The stall: the swarm goes on; nobody asks within the second.
  answers = {uint64_t{381}};
  clock.Advance(absl::Milliseconds(900));
  EXPECT_EQ(check.Poll(372, query, data), std::nullopt);
  EXPECT_EQ(asked, 1);
  clock.Advance(absl::Milliseconds(100));
  EXPECT_EQ(check.Poll(372, query, data), Verdict(BehindVerdict::kReenter, 381));
  EXPECT_EQ(asked, 2);
  // Re-entered at 383: a new start asks at once and finds it in step.
  check.Reset();
  answers = {uint64_t{383}};
  EXPECT_EQ(check.Poll(383, query, data), std::nullopt);
  EXPECT_EQ(asked, 3);
}

TEST(BehindCheckTest, WithinTheLeadAndBehindAReplicaSayNothing) {
  common::SimClock clock;
  BehindCheck check({absl::Seconds(1), 4}, &clock);
  auto poll = [&](uint64_t own, Answers replicas, Answers data) {
    clock.Advance(absl::Seconds(1));
    return check.Poll(own, [&] { return replicas; }, [&] { return data; });
  };
  const Answers in_step = {uint64_t{101}};
  EXPECT_EQ(poll(100, {uint64_t{104}}, in_step), std::nullopt);  // exactly the lead
  EXPECT_EQ(poll(100, {}, {uint64_t{104}}), std::nullopt);       // the data nodes, too
  EXPECT_EQ(poll(100, {}, in_step), std::nullopt);               // a sole replica in step
  EXPECT_EQ(poll(100, {absl::UnavailableError("gone")}, in_step), std::nullopt);
  EXPECT_EQ(poll(100, {uint64_t{90}}, in_step), std::nullopt);  // it is the one behind
  EXPECT_EQ(poll(100, {}, {absl::UnavailableError("gone")}), std::nullopt);  // no clock
  // The highest answer decides; a dead replica next to it does not hide it.
  EXPECT_EQ(poll(100, {absl::UnavailableError("gone"), uint64_t{101}, uint64_t{140}}, in_step),
            Verdict(BehindVerdict::kReenter, 140));
  // Stage and data nodes both far ahead: take the replica's state.
  EXPECT_EQ(poll(100, {uint64_t{140}}, {uint64_t{141}}), Verdict(BehindVerdict::kReenter, 140));
  // Our stage is behind the data nodes, but a replica is past us: it is
  // the stage's most advanced copy and moves ahead; we re-enter from it.
  EXPECT_EQ(poll(100, {uint64_t{102}}, {uint64_t{140}}), std::nullopt);
}

// Note [Sole replica behind], as the 1000-iteration chaos soak found it: the
// stage's only replica, SIGSTOPped, came back stuck in its iteration while
// the data nodes went on. Nobody of its stage is ahead, so it must move
// ahead with its own state to the data nodes' iteration (the old check
// answered nothing, and the swarm trained nothing for the rest of the run).
TEST(BehindCheckTest, ASoleReplicaBehindTheDataNodesMovesAheadWithItsOwnState) {
  common::SimClock clock;
  BehindCheck check({absl::Seconds(1), 4}, &clock);
  Answers data = {uint64_t{556}};
  const BehindCheck::Query none = [] { return Answers{}; };
  const BehindCheck::Query data_nodes = [&] { return data; };
  EXPECT_EQ(check.Poll(554, none, data_nodes), std::nullopt);  // in step before the stall
  data = {absl::UnavailableError("stalled"), uint64_t{600}, uint64_t{599}};
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(check.Poll(554, none, data_nodes), Verdict(BehindVerdict::kMoveAhead, 600));
  // Replicas whose peers are all dead are sole replicas: dead members are
  // not asked. Replicas stuck in the same iteration both move (equal states).
  check.Reset();
  EXPECT_EQ(check.Poll(554, [] { return Answers{uint64_t{554}}; }, data_nodes),
            Verdict(BehindVerdict::kMoveAhead, 600));
  // The one further on moves; the one behind it waits to re-enter from it.
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(check.Poll(554, [] { return Answers{uint64_t{552}}; }, data_nodes),
            Verdict(BehindVerdict::kMoveAhead, 600));
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(check.Poll(552, [] { return Answers{uint64_t{554}}; }, data_nodes), std::nullopt);
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(check.Poll(552, [] { return Answers{uint64_t{600}}; }, data_nodes),
            Verdict(BehindVerdict::kReenter, 600));
}

// Within the lead our server admits the data nodes' frames, which wait out
// their deadline: the data nodes crawl on (sole_replica_stall_test: 105 s
// from iteration 45 to 49). Two iterations ahead of an iteration of ours
// that does not move for `stuck_checks` checks is stuck enough; a replica
// that moves, however slowly, is not.
TEST(BehindCheckTest, DataNodesTwoAheadOfAnIterationThatDoesNotMoveMeanStuck) {
  common::SimClock clock;
  BehindCheck check({absl::Seconds(1), 4, /*confirm=*/3, /*stuck_checks=*/5}, &clock);
  const BehindCheck::Query none = [] { return Answers{}; };
  auto poll = [&](uint64_t own, uint64_t data) {
    clock.Advance(absl::Seconds(1));
    return check.Poll(own, none, [&] { return Answers{data}; });
  };
  EXPECT_EQ(poll(44, 45), std::nullopt);  // one ahead: where a working relay is
  for (int i = 0; i < 4; ++i) EXPECT_EQ(poll(44, 46 + i / 2), std::nullopt) << i;
  EXPECT_EQ(poll(44, 47), Verdict(BehindVerdict::kMoveAhead, 47));
  // Slow but moving: never.
  for (uint64_t own = 100; own < 120; ++own) EXPECT_EQ(poll(own, own + 3), std::nullopt) << own;
}

// A stalled peer holds up our reduce until the group drops it: our
// iteration does not move while the data nodes go on, but we are waiting,
// not stuck (the soak's s2r0 moved ahead at 22 while s2r1 was stopped).
// Only the data nodes beyond the lead count then.
TEST(BehindCheckTest, AListedReplicaThatDoesNotAnswerIsWaitedForNotStuck) {
  common::SimClock clock;
  BehindCheck check({absl::Seconds(1), 4, /*confirm=*/3, /*stuck_checks=*/5}, &clock);
  const BehindCheck::Query silent = [] {
    return Answers{absl::DeadlineExceededError("stopped")};
  };
  auto poll = [&](uint64_t own, uint64_t data) {
    clock.Advance(absl::Seconds(1));
    return check.Poll(own, silent, [&] { return Answers{data}; });
  };
  for (int i = 0; i < 10; ++i) EXPECT_EQ(poll(22, 24), std::nullopt) << i;
  EXPECT_EQ(poll(22, 27), std::nullopt);
  EXPECT_EQ(poll(22, 27), std::nullopt);
  EXPECT_EQ(poll(22, 27), Verdict(BehindVerdict::kMoveAhead, 27));
}

// A listed replica that does not answer may hold a newer state (stalled
// too) or be slow: moving ahead waits until it has been silent in
// `confirm` checks in a row; an answer in between starts the count again.
TEST(BehindCheckTest, AListedReplicaThatDoesNotAnswerDelaysTheMoveForConfirmChecks) {
  common::SimClock clock;
  BehindCheck check({absl::Seconds(1), 4, /*confirm=*/3}, &clock);
  Answers replicas = {absl::DeadlineExceededError("no answer")};
  const BehindCheck::Query peers = [&] { return replicas; };
  const BehindCheck::Query data = [] { return Answers{uint64_t{600}}; };
  auto poll = [&] {
    clock.Advance(absl::Seconds(1));
    return check.Poll(554, peers, data);
  };
  EXPECT_EQ(poll(), std::nullopt);
  EXPECT_EQ(poll(), std::nullopt);
  replicas = {uint64_t{553}};  // it answers: behind us, so we are the stage's newest
  EXPECT_EQ(poll(), Verdict(BehindVerdict::kMoveAhead, 600));
  check.Reset();
  replicas = {absl::DeadlineExceededError("no answer")};
  EXPECT_EQ(poll(), std::nullopt);
  replicas = {uint64_t{556}};  // past us: it moves, not we
  EXPECT_EQ(poll(), std::nullopt);
  replicas = {absl::DeadlineExceededError("no answer")};
  EXPECT_EQ(poll(), std::nullopt);
  EXPECT_EQ(poll(), std::nullopt);
  EXPECT_EQ(poll(), Verdict(BehindVerdict::kMoveAhead, 600));
}

// Note [Data node behind], as the 1000-iteration chaos soak found it: d1
// dropped a CPU-starved d0 from its barrier and went on alone while d0
// stayed paused in iteration 138; nothing brought d0 back, and the relays'
// barriers waited for it, so the swarm trained nothing for the rest of the
// run. The daemon polls every 100 ms (its main loop); d1 finishes an empty
// iteration a second. d0 must find itself behind once d1 is more than the
// lead ahead, ask only the other data nodes (it is the clock: no move
// ahead with its own state), and after its re-entry train in step again.
TEST(BehindCheckTest, ADataNodeLeftBehindByTheOtherDataNodesReentersLikeARelay) {
  common::SimClock clock;
  BehindCheck d0_check({absl::Seconds(1), 4}, &clock);
  uint64_t d0 = 138;
  uint64_t d1 = 139;  // went on without d0
  std::vector<std::pair<int, size_t>> asked;  // (stage, at most) of d0's questions
  const BehindCheck::AskStage d0_asks = [&](int stage, size_t at_most) {
    asked.emplace_back(stage, at_most);
    return Answers{d1};
  };
  const std::vector<int> data_stage = {0};
  std::optional<BehindVerdict> verdict;
  absl::Duration found;
  for (int tick = 1; tick <= 600 && !verdict.has_value(); ++tick) {
    clock.Advance(absl::Milliseconds(100));
    if (tick % 10 == 0) ++d1;
    verdict = d0_check.PollMember(data_stage, [&] { return d0; }, d0_asks);
    if (verdict.has_value()) found = clock.SteadyNow();
  }
  ASSERT_TRUE(verdict.has_value()) << "d0 never found itself behind d1 in 60 s";
  // d1 is more than the lead ahead at 143, 4 s after the split; the check
  // of that second says so.
  EXPECT_EQ(*verdict, Verdict(BehindVerdict::kReenter, 143));
  EXPECT_LE(found, absl::Seconds(5));
  // Only the other data nodes, a few of them, were asked, once a second.
  for (const auto& [stage, at_most] : asked) {
    EXPECT_EQ(stage, 0);
    EXPECT_EQ(at_most, kDataNodesAsked);
  }
  EXPECT_EQ(asked.size(), 5u);
  // Re-entered (Reenter: the joiner's path) one iteration after d1's:
  // from now on d0 and d1 pass every barrier together, at most one apart,
  // and nobody is behind for the rest of the run.
  d0_check.Reset();
  d0 = d1 + 1;
  for (int tick = 1; tick <= 1200; ++tick) {
    clock.Advance(absl::Milliseconds(100));
    if (tick % 10 == 0) {
      ++d1;
      ++d0;
    }
    ASSERT_EQ(d0_check.PollMember(data_stage, [&] { return d0; }, d0_asks), std::nullopt) << tick;
  }
}

TEST(BehindCheckTest, ADataNodeNeverMovesAheadAndAsksNoClock) {
  common::SimClock clock;
  BehindCheck check({absl::Seconds(1), 4}, &clock);
  int clock_questions = 0;
  auto poll = [&](uint64_t own, Answers others) {
    clock.Advance(absl::Seconds(1));
    return check.PollMember({0}, [own] { return own; }, [&](int stage, size_t at_most) {
      EXPECT_EQ(stage, 0);
      EXPECT_EQ(at_most, kDataNodesAsked);
      ++clock_questions;
      return others;
    });
  };
  EXPECT_EQ(poll(100, {uint64_t{101}}), std::nullopt);  // in step
  EXPECT_EQ(poll(100, {uint64_t{104}}), std::nullopt);  // exactly the lead
  EXPECT_EQ(poll(140, {uint64_t{100}}), std::nullopt);  // it is the one behind
  EXPECT_EQ(poll(100, {}), std::nullopt);               // the only data node: the clock
  // Others silent for long, or stuck two behind us: a data node is the
  // clock, never a stage behind the data nodes.
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(poll(100, {absl::UnavailableError("gone")}), std::nullopt) << i;
    EXPECT_EQ(poll(100, {uint64_t{98}}), std::nullopt) << i;
  }
  EXPECT_EQ(poll(100, {absl::UnavailableError("gone"), uint64_t{120}}),
            Verdict(BehindVerdict::kReenter, 120));
  EXPECT_EQ(clock_questions, 25);
}

// Note [Data node behind], the split where both go on (two data nodes as
// real processes, d0 stopped for 10 s): each dropped the other and both
// went on alone, within the lead of each other, for the rest of the run.
// Two apart, they are not in one barrier; in `stuck_checks` checks in a
// row the one behind re-enters. One apart is where data nodes of one
// barrier are; iterations we finish while asking do not count.
TEST(BehindCheckTest, DataNodesTwoApartForStuckChecksAreNotInOneBarrier) {
  common::SimClock clock;
  BehindCheck check({absl::Seconds(1), 4, /*confirm=*/3, /*stuck_checks=*/5}, &clock);
  uint64_t mine = 60;
  uint64_t other = 62;
  auto poll = [&] {
    clock.Advance(absl::Seconds(1));
    return check.PollMember({0}, [&] { return mine; },
                            [&](int, size_t) { return Answers{other}; });
  };
  for (int i = 0; i < 4; ++i) EXPECT_EQ(poll(), std::nullopt) << i;
  EXPECT_EQ(poll(), Verdict(BehindVerdict::kReenter, 62));
  // In one barrier: one apart, either way, for as long as it lasts.
  check.Reset();
  mine = 63;
  for (int i = 0; i < 60; ++i) {
    other = mine + (i % 2);
    ASSERT_EQ(poll(), std::nullopt) << i;
    ++mine;
  }
  // A stretch two apart that ends within the checks starts the count again.
  for (int round = 0; round < 3; ++round) {
    other = mine + 2;
    for (int i = 0; i < 4; ++i) EXPECT_EQ(poll(), std::nullopt) << round << " " << i;
    other = mine + 1;
    EXPECT_EQ(poll(), std::nullopt) << round;
  }
  // Our own iteration is read after the answers: ten iterations finished
  // while the other data node answered 110 put us in step with it.
  check.Reset();
  mine = 100;
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(check.PollMember({0}, [&] { return mine; },
                             [&](int, size_t) {
                               mine = 110;
                               return Answers{uint64_t{110}};
                             }),
            std::nullopt);
}

// A relay asks as before: all of its stage's replicas, a few data nodes; a
// member hosting several stages asks nothing here (it asks by PollStages).
TEST(BehindCheckTest, ARelayAsksItsReplicasAndAFewDataNodes) {
  common::SimClock clock;
  BehindCheck check({absl::Seconds(1), 4}, &clock);
  std::vector<std::pair<int, size_t>> asked;
  auto ask = [&](int stage, size_t at_most) {
    asked.emplace_back(stage, at_most);
    return stage == 0 ? Answers{uint64_t{600}} : Answers{uint64_t{553}};
  };
  EXPECT_EQ(check.PollMember({2}, [] { return uint64_t{554}; }, ask),
            Verdict(BehindVerdict::kMoveAhead, 600));
  const std::vector<std::pair<int, size_t>> relay = {
      {2, std::numeric_limits<size_t>::max()}, {0, kDataNodesAsked}};
  EXPECT_EQ(asked, relay);
  asked.clear();
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(check.PollMember({1, 2}, [] { return uint64_t{554}; }, ask), std::nullopt);
  EXPECT_TRUE(asked.empty());
}

// Note [Behind on any stage] (gossip_daemon_join.cc): a member hosting
// stages 1 and 2 is asked about the live replicas of both (one answer per
// peer, however many of our stages it hosts). One of them more than the
// lead ahead of our iteration, read after the answers, re-enters us, at
// most once per `every`; within the lead, errors, or nobody to ask (a stage
// of ours with no live replica) say nothing, and it never moves ahead.
TEST(BehindCheckTest, AMemberHostingSeveralStagesReentersWhenAnyStageIsAhead) {
  common::SimClock clock;
  BehindCheck check({absl::Seconds(1), 4}, &clock);
  uint64_t mine = 40;
  int asked = 0;
  Answers answers;
  const BehindCheck::Query replicas = [&] {
    ++asked;
    return answers;
  };
  auto poll = [&] {
    clock.Advance(absl::Seconds(1));
    return check.PollStages([&] { return mine; }, replicas);
  };
  answers = {uint64_t{41}, uint64_t{44}};  // stage 1's, stage 2's: within the lead
  EXPECT_EQ(poll(), std::nullopt);
  answers = {};  // a stage of ours has no live replica: nobody asked
  EXPECT_EQ(poll(), std::nullopt);
  answers = {absl::UnavailableError("gone"), uint64_t{40}};
  EXPECT_EQ(poll(), std::nullopt);
  answers = {uint64_t{41}, uint64_t{45}};  // stage 2's replica past the lead
  EXPECT_EQ(poll(), Verdict(BehindVerdict::kReenter, 45));
  // At most once per `every`.
  const int before = asked;
  EXPECT_FALSE(check.DueNow());
  EXPECT_EQ(check.PollStages([&] { return mine; }, replicas), std::nullopt);
  EXPECT_EQ(asked, before);
  // Iterations we finished while asking do not count against us.
  answers = {uint64_t{48}};
  EXPECT_EQ(poll(), Verdict(BehindVerdict::kReenter, 48));
  const BehindCheck::Query catching_up = [&] {
    mine = 47;
    return Answers{uint64_t{48}};
  };
  clock.Advance(absl::Seconds(1));
  mine = 40;
  EXPECT_EQ(check.PollStages([&] { return mine; }, catching_up), std::nullopt);
  // Far behind the data nodes with no replica ahead: no move ahead (no data
  // node is asked at all).
  mine = 40;
  answers = {uint64_t{40}, uint64_t{40}};
  for (int i = 0; i < 10; ++i) EXPECT_EQ(poll(), std::nullopt) << i;
}

// Note [Own iteration after the answers], as gossip_daemon_test found it
// under load: both replicas of stage 2 at 79, in step; while the data nodes
// were asked the trainer finished iterations up to 84, and the data nodes
// answered 85 (one on: waiting for our reduce). Compared with 79 that was
// more than the lead: both replicas moved ahead and dropped iteration 84.
TEST(BehindCheckTest, IterationsFinishedWhileAskingDoNotCountAgainstARelay) {
  common::SimClock clock;
  BehindCheck check({absl::Seconds(1), 4}, &clock);
  uint64_t mine = 79;
  auto ask = [&](int stage, size_t) {
    if (stage != 0) return Answers{uint64_t{79}};
    mine = 84;  // the trainer went on while the data nodes answered
    return Answers{uint64_t{85}};
  };
  for (int i = 0; i < 10; ++i) {
    mine = 79;
    EXPECT_EQ(check.PollMember({2}, [&] { return mine; }, ask), std::nullopt) << "check " << i;
    clock.Advance(absl::Seconds(1));
  }
  // Really behind after the answers: still moves ahead.
  auto far = [&](int stage, size_t) {
    return stage == 0 ? Answers{uint64_t{90}} : Answers{uint64_t{79}};
  };
  mine = 79;
  EXPECT_EQ(check.PollMember({2}, [&] { return mine; }, far),
            Verdict(BehindVerdict::kMoveAhead, 90));
}

// DueNow is exactly "the next PollMember asks": the daemon skips building
// its membership view for `ask` when it is false, so a false DueNow before
// a poll that would ask would lose a check.
TEST(BehindCheckTest, DueNowSaysWhetherTheNextPollAsks) {
  common::SimClock clock;
  BehindCheck check({absl::Seconds(1), 4}, &clock);
  int asked = 0;
  const BehindCheck::AskStage ask = [&](int, size_t) {
    ++asked;
    return Answers{uint64_t{10}};
  };
  auto poll = [&](const std::vector<int>& stages) {
    return check.PollMember(stages, [] { return uint64_t{10}; }, ask);
  };
  for (const std::vector<int>& stages : {std::vector<int>{0}, std::vector<int>{2}}) {
    check.Reset();
    clock.Advance(absl::Seconds(5));
    EXPECT_TRUE(check.DueNow());
    EXPECT_TRUE(check.DueNow());  // peeking does not use the check up
    int before = asked;
    EXPECT_EQ(poll(stages), std::nullopt);
    EXPECT_GT(asked, before);
    for (int tick = 1; tick < 10; ++tick) {
      clock.Advance(absl::Milliseconds(100));
      EXPECT_FALSE(check.DueNow()) << tick;
      before = asked;
      EXPECT_EQ(poll(stages), std::nullopt);
      EXPECT_EQ(asked, before) << tick;
    }
    clock.Advance(absl::Milliseconds(100));
    EXPECT_TRUE(check.DueNow());
    before = asked;
    EXPECT_EQ(poll(stages), std::nullopt);
    EXPECT_GT(asked, before);
    EXPECT_FALSE(check.DueNow());
    check.Reset();
    EXPECT_TRUE(check.DueNow());
  }
}

}  // namespace
}  // namespace skipswarm::node
