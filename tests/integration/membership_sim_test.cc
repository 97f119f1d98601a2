// SWIM on the simulated clock and network: convergence, failure detection,
// loss, partitions, flapping, simultaneous joins, leave. Deterministic
// (fixed seeds). Measured figures are printed as "FIGURE name=value".
#include <iostream>

#include "gtest/gtest.h"
#include "membership/suspicion.h"
#include "proto/version.h"
#include "sim/sim_swarm.h"

namespace skipswarm::membership {
namespace {

using sim::SimNetwork;
using sim::SimSwarm;

constexpr int kNodes = 12;

MembershipOptions Defaults() {
  MembershipOptions o;
  o.policy.swarm_id = "sim-swarm";
  return o;
}

SimNetwork::Options Net(double loss = 0) {
  SimNetwork::Options n;
  n.latency = absl::Milliseconds(5);
  n.jitter = absl::Milliseconds(5);
  n.loss = loss;
  return n;
}

void Figure(const std::string& name, double value) {
  std::cout << "FIGURE " << name << "=" << value << std::endl;
  ::testing::Test::RecordProperty(name, std::to_string(value));
}

// The SWIM protocol period (one probe round) is the "gossip period".
double Periods(absl::Duration d) {
  return absl::FDivDuration(d, Defaults().probe_interval);
}

int CountTransitionsTo(const SimSwarm& swarm, proto::MemberState state,
                       int subject = -1) {
  int n = 0;
  for (const auto& t : swarm.transitions()) {
    if (t.state == state && (subject < 0 || t.subject == subject)) ++n;
  }
  return n;
}

TEST(MembershipSimTest, TwelveNodesConvergeFromOneBootstrapWithinFivePeriods) {
  double worst = 0;
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    SimSwarm swarm(seed, Net(), Defaults());
    for (int i = 0; i < kNodes; ++i) swarm.AddNode({static_cast<uint32_t>(i % 4)});
    swarm.StartAll(/*bootstrap=*/0);
    absl::Duration t =
        swarm.RunUntil([&] { return swarm.Converged(); }, absl::Seconds(30));
    ASSERT_NE(t, absl::InfiniteDuration()) << "seed " << seed;
    worst = std::max(worst, Periods(t));
    std::cout << "seed " << seed << ": converged in " << t << " = "
              << Periods(t) << " periods" << std::endl;
  }
  Figure("convergence_periods_worst_of_5_seeds", worst);
  EXPECT_LE(worst, 5.0);
}

TEST(MembershipSimTest, SimultaneousJoinsThroughDifferentPeersConverge) {
  SimSwarm swarm(11, Net(), Defaults());
  for (int i = 0; i < kNodes; ++i) swarm.AddNode();
  swarm.StartAndJoin(0, {});
  for (int i = 1; i < kNodes; ++i) swarm.StartAndJoin(i, {i - 1});  // a chain
  absl::Duration t =
      swarm.RunUntil([&] { return swarm.Converged(); }, absl::Seconds(30));
  ASSERT_NE(t, absl::InfiniteDuration());
  Figure("chain_join_convergence_periods", Periods(t));
  EXPECT_LE(Periods(t), 10.0);
}

TEST(MembershipSimTest, KilledNodeIsDeadInEveryViewWithinThreeSeconds) {
  absl::Duration worst;
  absl::Duration total;
  int runs = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    SimSwarm swarm(seed, Net(), Defaults());
    for (int i = 0; i < kNodes; ++i) swarm.AddNode();
    swarm.StartAll(0);
    ASSERT_NE(swarm.RunUntil([&] { return swarm.Converged(); }, absl::Seconds(30)),
              absl::InfiniteDuration());
    swarm.Run(absl::Seconds(1) * static_cast<double>(seed) / 3);  // vary phase
    const int victim = static_cast<int>(seed * 5 % kNodes);
    swarm.Kill(victim);
    absl::Duration t = swarm.RunUntil(
        [&] { return swarm.AllSee(victim, proto::MEMBER_STATE_DEAD); },
        absl::Seconds(30));
    ASSERT_NE(t, absl::InfiniteDuration()) << "seed " << seed;
    std::cout << "seed " << seed << ": node " << victim << " dead everywhere after "
              << t << std::endl;
    worst = std::max(worst, t);
    total += t;
    ++runs;
    // Nobody else was declared dead on the way.
    for (int i = 0; i < kNodes; ++i) {
      if (i != victim) {
        EXPECT_EQ(CountTransitionsTo(swarm, proto::MEMBER_STATE_DEAD, i), 0);
      }
    }
  }
  Figure("detection_seconds_worst", absl::ToDoubleSeconds(worst));
  Figure("detection_seconds_mean", absl::ToDoubleSeconds(total / runs));
  EXPECT_LE(worst, absl::Seconds(3));
}

TEST(MembershipSimTest, ConvergesAndDetectsUnderTenPercentLoss) {
  SimSwarm swarm(3, Net(/*loss=*/0.10), Defaults());
  for (int i = 0; i < kNodes; ++i) swarm.AddNode();
  swarm.StartAll(0);
  absl::Duration t =
      swarm.RunUntil([&] { return swarm.Converged(); }, absl::Seconds(60));
  ASSERT_NE(t, absl::InfiniteDuration());
  Figure("convergence_periods_10pct_loss", Periods(t));
  swarm.Run(absl::Seconds(30));
  EXPECT_EQ(CountTransitionsTo(swarm, proto::MEMBER_STATE_DEAD), 0);
  swarm.Kill(4);
  absl::Duration d = swarm.RunUntil(
      [&] { return swarm.AllSee(4, proto::MEMBER_STATE_DEAD); }, absl::Seconds(30));
  ASSERT_NE(d, absl::InfiniteDuration());
  Figure("detection_seconds_10pct_loss", absl::ToDoubleSeconds(d));
}

TEST(MembershipSimTest, NoFalsePositivesUnderLossOverTenSimulatedMinutes) {
  SimSwarm swarm(5, Net(/*loss=*/0.05), Defaults());
  for (int i = 0; i < kNodes; ++i) swarm.AddNode();
  swarm.StartAll(0);
  ASSERT_NE(swarm.RunUntil([&] { return swarm.Converged(); }, absl::Seconds(60)),
            absl::InfiniteDuration());
  swarm.Run(absl::Minutes(10));
  int suspicions = CountTransitionsTo(swarm, proto::MEMBER_STATE_SUSPECT);
  Figure("suspicions_in_10min_5pct_loss", suspicions);
  Figure("messages_sent_10min", static_cast<double>(swarm.net().messages_sent()));
  EXPECT_EQ(CountTransitionsTo(swarm, proto::MEMBER_STATE_DEAD), 0);
  EXPECT_TRUE(swarm.Converged());
}

TEST(MembershipSimTest, PartitionIsDetectedAndHeals) {
  SimSwarm swarm(7, Net(), Defaults());
  for (int i = 0; i < kNodes; ++i) swarm.AddNode();
  swarm.StartAll(0);
  ASSERT_NE(swarm.RunUntil([&] { return swarm.Converged(); }, absl::Seconds(30)),
            absl::InfiniteDuration());
  std::vector<std::string> side;
  for (int i = 0; i < kNodes / 2; ++i) side.push_back(swarm.address(i));
  swarm.net().Partition(side);
  // Each side declares the other dead.
  ASSERT_NE(swarm.RunUntil(
                [&] {
                  return swarm.AllSee(0, proto::MEMBER_STATE_DEAD) ==
                         false &&  // side A still sees 0 alive...
                         [&] {
                           for (int i = kNodes / 2; i < kNodes; ++i) {
                             const View view = swarm.node(i).GetView();
                             const MemberInfo* m = view.Find(swarm.id(0));
                             if (m == nullptr || m->state != proto::MEMBER_STATE_DEAD)
                               return false;
                           }
                           return true;
                         }();
                },
                absl::Seconds(30)),
            absl::InfiniteDuration());
  swarm.Run(absl::Seconds(5));
  swarm.net().Heal();
  absl::Duration t =
      swarm.RunUntil([&] { return swarm.Converged(); }, absl::Seconds(60));
  ASSERT_NE(t, absl::InfiniteDuration());
  Figure("partition_heal_seconds", absl::ToDoubleSeconds(t));
}

TEST(MembershipSimTest, FlappingNodeEndsAliveAndNobodyElseDies) {
  SimSwarm swarm(9, Net(), Defaults());
  for (int i = 0; i < kNodes; ++i) swarm.AddNode();
  swarm.StartAll(0);
  ASSERT_NE(swarm.RunUntil([&] { return swarm.Converged(); }, absl::Seconds(30)),
            absl::InfiniteDuration());
  const int flapper = 3;
  for (int k = 0; k < 5; ++k) {
    swarm.net().SetDown(swarm.address(flapper), true);
    swarm.Run(absl::Milliseconds(700 + 400 * k));  // short and long outages
    swarm.net().SetDown(swarm.address(flapper), false);
    swarm.Run(absl::Seconds(2));
  }
  absl::Duration t =
      swarm.RunUntil([&] { return swarm.Converged(); }, absl::Seconds(60));
  ASSERT_NE(t, absl::InfiniteDuration());
  Figure("flapping_reconverge_seconds", absl::ToDoubleSeconds(t));
  // Other nodes may be suspected by the flapper while it is cut off, but
  // the rest of the swarm never declares any of them dead.
  for (const auto& tr : swarm.transitions()) {
    if (tr.observer != flapper && tr.subject != flapper) {
      EXPECT_NE(tr.state, proto::MEMBER_STATE_DEAD)
          << tr.observer << " saw " << tr.subject << " dead at " << tr.at;
    }
  }
}

TEST(MembershipSimTest, RestartedNodeRejoinsWithNewerIncarnation) {
  SimSwarm swarm(13, Net(), Defaults());
  for (int i = 0; i < kNodes; ++i) swarm.AddNode();
  swarm.StartAll(0);
  ASSERT_NE(swarm.RunUntil([&] { return swarm.Converged(); }, absl::Seconds(30)),
            absl::InfiniteDuration());
  swarm.Kill(6);
  ASSERT_NE(swarm.RunUntil([&] { return swarm.AllSee(6, proto::MEMBER_STATE_DEAD); },
                           absl::Seconds(10)),
            absl::InfiniteDuration());
  swarm.Restart(6, 0);
  ASSERT_NE(swarm.RunUntil([&] { return swarm.Converged(); }, absl::Seconds(30)),
            absl::InfiniteDuration());
}

TEST(MembershipSimTest, GracefulLeaveIsSeenAsLeftNotDead) {
  SimSwarm swarm(17, Net(), Defaults());
  for (int i = 0; i < kNodes; ++i) swarm.AddNode();
  swarm.StartAll(0);
  ASSERT_NE(swarm.RunUntil([&] { return swarm.Converged(); }, absl::Seconds(30)),
            absl::InfiniteDuration());
  bool left = false;
  swarm.node(8).Leave([&] { left = true; });
  absl::Duration t = swarm.RunUntil(
      [&] { return left && swarm.AllSee(8, proto::MEMBER_STATE_LEFT); },
      absl::Seconds(10));
  ASSERT_NE(t, absl::InfiniteDuration());
  Figure("leave_propagation_seconds", absl::ToDoubleSeconds(t));
  swarm.Kill(8);  // the process exits after leaving
  swarm.Run(absl::Seconds(10));
  EXPECT_EQ(CountTransitionsTo(swarm, proto::MEMBER_STATE_DEAD, 8), 0);
  EXPECT_TRUE(swarm.Converged());
}

// The same timeouts as before dynamic suspicion: always the minimum.
MembershipOptions FixedSuspicion() {
  MembershipOptions o = Defaults();
  o.suspicion_max_multiplier = 1;
  o.suspicion_confirmations = 0;
  return o;
}

struct SlowRun {
  int dead_about_slow = 0;    // verdicts about the slow member
  int dead_about_others = 0;  // verdicts about anybody else
};

// Node 3 handles every message `delay` late for `window`, then recovers.
SlowRun RunWithSlowMember(uint64_t seed, const MembershipOptions& options,
                          absl::Duration delay, absl::Duration window) {
  SimSwarm swarm(seed, Net(), options);
  for (int i = 0; i < kNodes; ++i) swarm.AddNode();
  swarm.StartAll(0);
  EXPECT_NE(swarm.RunUntil([&] { return swarm.Converged(); }, absl::Seconds(30)),
            absl::InfiniteDuration());
  swarm.Run(absl::Milliseconds(100) * static_cast<double>(seed));  // vary phase
  const int slow = 3;
  swarm.SetInboundDelay(slow, delay);
  swarm.Run(window);
  swarm.SetInboundDelay(slow, absl::ZeroDuration());
  swarm.Run(absl::Seconds(15));
  EXPECT_TRUE(swarm.Converged()) << "seed " << seed;
  SlowRun r;
  for (const auto& t : swarm.transitions()) {
    if (t.state != proto::MEMBER_STATE_DEAD) continue;
    ++(t.subject == slow ? r.dead_about_slow : r.dead_about_others);
  }
  return r;
}

// A member whose handlers run 1.5 s late (more than suspicion_timeout) for
// 1 s - a starved process - fails everybody's probes, but it is told of the
// suspicion directly (buddy system, with a deadline as long as the
// suspicion), its own requests keep reaching some others (a suspect that
// talks is slow, not dead; its refutation goes to every member at once,
// Note [Refutation over our own requests]), and its refutation arrives
// before the dynamic timeout runs out. Control: with a fixed timeout a
// stall twice as long gets it declared dead, so the scenario is known to
// bite. (Limit, measured: for 2 s of 1.5 s-late handlers it is declared
// dead in most seeds either way; membership/README.md.)
TEST(MembershipSimTest, SlowButAliveMemberIsNotDeclaredDead) {
  int dynamic_deaths = 0, fixed_deaths = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    SlowRun dynamic =
        RunWithSlowMember(seed, Defaults(), absl::Milliseconds(1500), absl::Seconds(1));
    EXPECT_EQ(dynamic.dead_about_slow, 0) << "seed " << seed;
    EXPECT_EQ(dynamic.dead_about_others, 0) << "seed " << seed;
    dynamic_deaths += dynamic.dead_about_slow + dynamic.dead_about_others;
    fixed_deaths +=
        RunWithSlowMember(seed, FixedSuspicion(), absl::Milliseconds(1500), absl::Seconds(2))
            .dead_about_slow;
  }
  Figure("slow_member_false_dead_dynamic", dynamic_deaths);
  Figure("slow_member_false_dead_fixed_timeout_2s", fixed_deaths);
  EXPECT_GT(fixed_deaths, 0);
}

// Lifeguard's dynamic suspicion, seen from node 0 of 12 while only node 0
// probes (the others' timers are stopped; they still answer): its lone
// suspicion of a crashed member lasts the maximum, 4 x 1 s x log10(12);
// each independent confirmation (another member's SUSPECT opinion,
// injected here) brings the verdict closer to the minimum.
TEST(MembershipSimTest, SuspicionTimeoutShrinksWithIndependentConfirmations) {
  const MembershipOptions o = Defaults();
  const SuspicionBounds bounds = ComputeSuspicionBounds(
      o.suspicion_timeout, o.suspicion_max_multiplier, o.suspicion_confirmations,
      kNodes);
  std::vector<absl::Duration> measured;
  for (int confirmations : {0, 1, 2, 3}) {
    SimSwarm swarm(21, Net(), o);
    for (int i = 0; i < kNodes; ++i) swarm.AddNode();
    swarm.StartAll(0);
    ASSERT_NE(swarm.RunUntil([&] { return swarm.Converged(); }, absl::Seconds(30)),
              absl::InfiniteDuration());
    const int victim = 5;
    for (int i = 1; i < kNodes; ++i) {
      if (i != victim) swarm.node(i).Stop();
    }
    swarm.Kill(victim);
    auto state_at_0 = [&] {
      const View view = swarm.node(0).GetView();
      return *view.Find(swarm.id(victim));
    };
    ASSERT_NE(swarm.RunUntil(
                  [&] { return state_at_0().state == proto::MEMBER_STATE_SUSPECT; },
                  absl::Seconds(10), absl::Milliseconds(1)),
              absl::InfiniteDuration());
    const absl::Duration suspected = swarm.clock().SteadyNow();
    for (int k = 1; k <= confirmations; ++k) {
      proto::PingRequest req;
      req.set_protocol_version(proto::kProtocolVersion);
      req.set_swarm_id(o.policy.swarm_id);
      req.set_from(swarm.id(k).Bytes());
      proto::MembershipUpdate* u = req.mutable_gossip()->add_updates();
      u->set_node_id(swarm.id(victim).Bytes());
      u->set_state(proto::MEMBER_STATE_SUSPECT);
      u->set_incarnation(state_at_0().incarnation);
      ASSERT_TRUE(SignOpinion(swarm.identity(k), o.policy.swarm_id, u).ok());
      swarm.node(0).HandlePing({swarm.address(k), swarm.id(k)}, req,
                               [](absl::StatusOr<proto::Ack>) {});
      swarm.node(0).HandlePing({swarm.address(k), swarm.id(k)}, req,  // again
                               [](absl::StatusOr<proto::Ack>) {});
    }
    ASSERT_NE(swarm.RunUntil(
                  [&] { return state_at_0().state == proto::MEMBER_STATE_DEAD; },
                  absl::Seconds(10), absl::Milliseconds(1)),
              absl::InfiniteDuration());
    const absl::Duration took = swarm.clock().SteadyNow() - suspected;
    std::cout << confirmations << " confirmations: DEAD after " << took
              << " (expected " << SuspicionTimeout(bounds, confirmations) << ")"
              << std::endl;
    // Plus the round trip of the pull before the verdict (<= 2 x (5 + 5)
    // ms here; Note [Outbound-only members], "a verdict is checked").
    EXPECT_NEAR(absl::ToDoubleSeconds(took),
                absl::ToDoubleSeconds(SuspicionTimeout(bounds, confirmations)) + 0.01,
                0.02)
        << confirmations << " confirmations";
    EXPECT_EQ(swarm.node(0).stats().confirmations,
              static_cast<uint64_t>(confirmations));
    measured.push_back(took);
  }
  EXPECT_EQ(bounds.max, 4 * bounds.min);
  Figure("lone_suspicion_seconds", absl::ToDoubleSeconds(measured.front()));
  Figure("suspicion_seconds_3_confirmations", absl::ToDoubleSeconds(measured.back()));
}

}  // namespace
}  // namespace skipswarm::membership
