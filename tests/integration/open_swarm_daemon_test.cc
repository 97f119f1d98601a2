// Notes [Join work] (membership/join_work.h) and [Newcomer probation]
// (node/daemon/gossip/training_members.h) with real GossipDaemons in one
// process over loopback gRPC (ports 0). An open swarm whose manifest asks
// for join work and probation: the founder (data node) and its two listed
// hosts (stages 1 and 2, trusted from the start) train the tiny model with
// a newcomer on stage 1. Every non-founder daemon solves its join work at
// start. The newcomer starts on probation (the founder's
// skipswarm_members_on_probation counts it) and is trusted once its stage-1
// replica's record vouches for it (that replica's skipswarm_vouches). A
// daemon whose record carries no work (its policy copy asks none, as a
// modified binary's would) is refused at join and never enters a view.
// Every daemon runs with --verify_rate=1: the newcomer's hops are checked
// while it is on probation, with no mismatch.
// Note [Vouch withdrawal] (node/daemon/gossip/newcomer_ledger.h): a
// newcomer that earned its voucher's word and then lies loses it at the
// first mismatch its voucher catches, and is back on probation everywhere.
// Note [Evidence bans] (node/stage/evidence_bans.h): a lying newcomer
// whose only catcher serves its signed evidence leaves the planner's routes
// though the quorum of Note [Verify bans] is never met.
// Waits on notifications and iteration counts, no sleeps.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include "third_party/cpp_httplib.h"

#include "absl/strings/numbers.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "identity/identity.h"
#include "identity/test_identity.h"
#include "membership/admission.h"
#include "nlohmann/json.hpp"
#include "node/compute/verify_test_util.h"
#include "node/daemon/gossip/gossip_daemon.h"
#include "node/daemon/stack/node_backend.h"
#include "node/daemon/stack/torch_backend.h"
#include "tests/integration/running_daemon.h"

namespace skipswarm::node {
namespace {

constexpr char kSwarm[] = "open-swarm-daemon-test";

// The value of gauge `name` (unlabelled) on `port`'s /metrics; -1 when absent.
double Gauge(int port, const std::string& name) {
  httplib::Client http("127.0.0.1", port);
  auto res = http.Get("/metrics");
  if (!res) return -1;
  const std::string key = "\n" + name + " ";
  const size_t at = res->body.find(key);
  if (at == std::string::npos) return -1;
  const size_t start = at + key.size();
  double v = -1;
  if (!absl::SimpleAtod(res->body.substr(start, res->body.find('\n', start) - start), &v)) {
    return -1;
  }
  return v;
}

// Waits for each next iteration `founder` reports (at most 100 ms at a
// time: its `finished` alone would not wake the wait) until `done` holds;
// how many iterations it had reported then, -1 if it finished first.
int64_t UntilEachIteration(RunningDaemon& founder, const std::function<bool()>& done) {
  while (!founder.finished.HasBeenNotified()) {
    founder.WaitForIteration(founder.LastIteration() + 1, absl::Milliseconds(100));
    if (done()) return founder.LastIteration() + 1;
  }
  return -1;
}

// Every iteration of the run reported, once each.
void ExpectEveryIteration(RunningDaemon& founder, int64_t iterations) {
  absl::MutexLock lock(&founder.mu);
  EXPECT_EQ(static_cast<int64_t>(founder.reports.size()), iterations);
}

class OpenSwarmDaemonTest : public AdmissionSwarmTest {
 protected:
  OpenSwarmDaemonTest() : AdmissionSwarmTest(kSwarm, "anyone may join this swarm, line ") {}
};

TEST_F(OpenSwarmDaemonTest, NewcomerWithWorkEarnsTrustWhileOneWithoutWorkIsRefused) {
  policy_.mode = membership::AdmissionMode::kOpen;
  policy_.founder_public_key = identity::TestIdentity('f')->public_key();
  policy_.allowed_ids = {identity::TestNodeId('t'), identity::TestNodeId('u')};  // the founder's own hosts
  policy_.join_work_bits = 10;
  policy_.manifest_id = std::string(64, 'e');
  policy_.probation_iterations = 4;
  constexpr int64_t kIterations = 60;

  GossipDaemonOptions f = Options("f", {0}, 'f');
  f.base.verify_rate = 1;  // Note [Sending checks]: every hop to a newcomer is checked
  f.expect_members = 4;
  f.base.iterations = kIterations;
  f.base.metrics_port = 0;
  auto founder = LaunchDaemon(f);
  ASSERT_NE(founder, nullptr);
  const std::string bootstrap = founder->daemon->gossip_address();
  std::vector<std::unique_ptr<RunningDaemon>> others;
  const struct {
    const char* name;
    int stage;
    char seed;
  } nodes[] = {{"t", 1, 't'}, {"u", 2, 'u'}, {"n", 1, 'n'}};
  for (const auto& node : nodes) {
    GossipDaemonOptions o = Options(node.name, {node.stage}, node.seed);
    o.expect_members = 4;
    o.base.iterations = kIterations;
    o.base.metrics_port = 0;
    o.base.verify_rate = 1;
    o.gossip.join = {bootstrap};
    others.push_back(LaunchDaemon(o));
    ASSERT_NE(others.back(), nullptr);
  }
  RunningDaemon* const t = others[0].get();
  RunningDaemon* const u = others[1].get();

  // A node whose record carries no work: refused at its join.
  GossipDaemonOptions s = Options("s", {1}, 's');
  s.gossip.admission.join_work_bits = 0;
  s.base.iterations = kIterations;
  s.gossip.join = {bootstrap};
  absl::StatusOr<std::unique_ptr<GossipDaemon>> stranger =
      GossipDaemon::Create(s, TorchNodeBackend());
  EXPECT_EQ(stranger.status().code(), absl::StatusCode::kPermissionDenied) << stranger.status();
  EXPECT_NE(stranger.status().message().find("join work"), std::string::npos)
      << stranger.status();

  // Each founder iteration: is the newcomer still on probation, and does t
  // vouch for it?
  double most_on_probation = -1, vouches = -1, on_probation = -1;
  const int64_t trusted_at = UntilEachIteration(*founder, [&] {
    on_probation = Gauge(founder->daemon->metrics_port(), "skipswarm_members_on_probation");
    most_on_probation = std::max(most_on_probation, on_probation);
    vouches = Gauge(t->daemon->metrics_port(), "skipswarm_vouches");
    return on_probation == 0 && vouches >= 1;
  });
  EXPECT_EQ(on_probation, 0);
  EXPECT_GE(vouches, 1);
  // Verified compute, on at rate 1 (Note [Sending checks]): while n was on
  // probation the founder, the hop before stage 1, also sent n's frames to
  // t, the trusted replica; u, the hop after, judged n's outputs against
  // t's sketches: all matched.
  const double checks_sent = Gauge(founder->daemon->metrics_port(),
                                   "skipswarm_verify_checks_sent_total");
  const double answered =
      Gauge(t->daemon->metrics_port(), "skipswarm_verify_checks_answered_total");
  const double judged = Gauge(u->daemon->metrics_port(), "skipswarm_verify_checks_judged_total");
  const double mismatches = Gauge(u->daemon->metrics_port(), "skipswarm_verify_mismatches_total");
  EXPECT_GT(checks_sent, 0);
  EXPECT_GT(answered, 0);
  EXPECT_GT(judged, 0);
  EXPECT_EQ(mismatches, 0);
  std::printf("FIGURE open swarm verify_rate=1: %g checks sent by the founder, %g answered by t, "
              "%g judged by u, %g mismatches\n", checks_sent, answered, judged, mismatches);
  std::printf("FIGURE newcomer_trusted_at_founder_iteration=%lld most_on_probation=%g\n",
              static_cast<long long>(trusted_at), most_on_probation);
  {
    httplib::Client http("127.0.0.1", founder->daemon->metrics_port());
    auto res = http.Get("/status.json");
    ASSERT_TRUE(res);
    const nlohmann::json st = nlohmann::json::parse(res->body, nullptr, false);
    ASSERT_FALSE(st.is_discarded());
    EXPECT_EQ(st["swarm"]["live_members"], 4) << st["swarm"];
    const std::string stranger_id = identity::TestNodeId('s').ShortString();
    for (const auto& m : st["swarm"]["members"]) EXPECT_NE(m["short"], stranger_id) << m;
  }
  founder->finished.WaitForNotification();
  for (auto& r : others) r->finished.WaitForNotification();
  EXPECT_TRUE(founder->result.ok()) << founder->result;
  for (auto& r : others) EXPECT_TRUE(r->result.ok()) << r->result;
  ExpectEveryIteration(*founder, kIterations);
}

// Founder f (data node, stage 0), trusted t hosting stages 1 and 2 (the
// allow-list), newcomer n on stage 1: t shares stage 1's replica group
// with n, so its ledger vouches for n after the probation, and t's stage 2
// is the hop after n's stage 1, so t judges n's outputs. Once n is trusted
// f checks n's hops at the trusted rate (a quarter of --verify_rate, Note
// [Trusted disputes]) against t, the only other replica. n scales its
// forwards x1.05 from the moment the test arms it, after n is trusted (a
// liar from the start is condemned on probation and never vouched for);
// its sketches as a verifier stay honest. t is then both the verifier and
// the catcher: the trusted pair's mismatch names n and t, and t withdraws
// its vouch for n (it holds none for itself, and keeps its own trust: it
// is on the allow-list).
TEST_F(OpenSwarmDaemonTest, ATrustedNewcomerCaughtLyingLosesItsVouchAndReturnsToProbation) {
  policy_.mode = membership::AdmissionMode::kOpen;
  policy_.founder_public_key = identity::TestIdentity('f')->public_key();
  policy_.allowed_ids = {identity::TestNodeId('t')};
  policy_.join_work_bits = 10;
  policy_.manifest_id = std::string(64, 'e');
  policy_.probation_iterations = 4;
  constexpr int64_t kIterations = 60;  // margin: n is trusted by ~15, caught again by ~25
  const common::NodeId n_id = identity::TestNodeId('n');
  const common::NodeId t_id = identity::TestNodeId('t');

  GossipDaemonOptions f = Options("f", {0}, 'f');
  f.base.verify_rate = 1;  // newcomers' hops all checked, trusted ones' a quarter
  f.expect_members = 3;
  f.base.iterations = kIterations;
  f.base.metrics_port = 0;
  auto founder = LaunchDaemon(f);
  ASSERT_NE(founder, nullptr);
  const std::string bootstrap = founder->daemon->gossip_address();
  const auto joiner = [&](const char* name, std::vector<int> stages, char seed) {
    GossipDaemonOptions o = Options(name, std::move(stages), seed);
    o.expect_members = 3;
    o.base.iterations = kIterations;
    o.base.metrics_port = 0;
    o.base.verify_rate = 1;
    o.gossip.join = {bootstrap};
    return o;
  };
  std::unique_ptr<RunningDaemon> t = LaunchDaemon(joiner("t", {1, 2}, 't'));
  ASSERT_NE(t, nullptr);
  // n's computes: libtorch's, wrapped (this daemon's backend only).
  std::atomic<bool> armed{false};
  NodeBackend lying = TorchNodeBackend();
  lying.create_compute = [&armed, inner = lying.create_compute](
                             const NodeDaemonOptions& o, int stage, TaskRunner* runner,
                             common::Clock* clock) -> absl::StatusOr<std::unique_ptr<StageCompute>> {
    absl::StatusOr<std::unique_ptr<StageCompute>> c = inner(o, stage, runner, clock);
    if (!c.ok()) return c;
    return std::make_unique<testing::LyingCompute>(*std::move(c),
                                                   testing::LyingCompute::Where::kForward,
                                                   testing::LyingCompute::Lie::kScale, 1.05,
                                                   &armed);
  };
  std::unique_ptr<RunningDaemon> n = LaunchDaemonWith(joiner("n", {1}, 'n'), std::move(lying));
  ASSERT_NE(n, nullptr);

  const auto until = [&](const std::function<bool()>& done) {
    return UntilEachIteration(*founder, done);
  };
  const auto on_probation = [&] {
    return Gauge(founder->daemon->metrics_port(), "skipswarm_members_on_probation");
  };
  const auto vouches = [&] { return Gauge(t->daemon->metrics_port(), "skipswarm_vouches"); };
  // t's verdicts on n so far: as a member on probation, and as a trusted
  // member paired with verifier t (Note [Trusted disputes]).
  const auto t_counts = [&](bool trusted, const common::NodeId& checked) {
    absl::MutexLock lock(&t->mu);
    if (t->reports.empty()) return MemberCheckCounts{};
    const StageServerStats& s = t->reports.back().server;
    const OutputCheckStats& c = trusted ? s.trusted_checks : s.checks;
    auto it = c.by_member.find(checked);
    return it == c.by_member.end() ? MemberCheckCounts{} : it->second;
  };

  const int64_t trusted_at = until([&] { return on_probation() == 0 && vouches() >= 1; });
  ASSERT_GE(trusted_at, 0) << "n never trusted";
  const int64_t probation_checks_before = t_counts(false, n_id).checks;
  EXPECT_EQ(t_counts(false, n_id).mismatches, 0);
  armed.store(true);

  // The first trusted mismatch t records: its vouch goes at its next
  // boundary, and with it n's trust at f once t's record arrives.
  const int64_t withdrawn_at = until([&] { return vouches() == 0 && on_probation() == 1; });
  ASSERT_GE(withdrawn_at, 0) << "t's vouch for n never withdrawn; vouches " << vouches()
                             << ", on probation at f " << on_probation();
  const MemberCheckCounts caught = t_counts(true, n_id);
  EXPECT_GE(caught.mismatches, 1);
  // n's honest sketches: t's own outputs, checked against them, matched.
  EXPECT_EQ(t_counts(true, t_id).mismatches, 0);
  int64_t first_mismatch_at = -1;
  {
    absl::MutexLock lock(&t->mu);
    for (const NodeIterationReport& r : t->reports) {
      auto it = r.server.trusted_checks.by_member.find(n_id);
      if (it != r.server.trusted_checks.by_member.end() && it->second.mismatches > 0) {
        first_mismatch_at = static_cast<int64_t>(r.iteration);
        break;
      }
    }
  }
  EXPECT_GE(first_mismatch_at, trusted_at);
  EXPECT_LE(first_mismatch_at, withdrawn_at);

  // Back on probation, n is routed only beside t and every hop to it is
  // checked again as a newcomer's: t judges it as one, and catches it.
  const int64_t rechecked_at = until([&] {
    return t_counts(false, n_id).checks > probation_checks_before &&
           t_counts(false, n_id).mismatches > 0;
  });
  EXPECT_GE(rechecked_at, 0) << "n never checked as a newcomer again";
  EXPECT_EQ(vouches(), 0);  // a member it caught since is not vouched for again
  std::printf("FIGURE vouch withdrawal: n trusted at founder iteration %lld, liar armed then; "
              "first trusted mismatch at t's iteration %lld (%lld trusted checks of n, %lld "
              "mismatched); t's vouch gone and n on probation at f by founder iteration %lld; "
              "n checked and caught as a newcomer again by %lld\n",
              static_cast<long long>(trusted_at), static_cast<long long>(first_mismatch_at),
              static_cast<long long>(caught.checks), static_cast<long long>(caught.mismatches),
              static_cast<long long>(withdrawn_at), static_cast<long long>(rechecked_at));

  founder->finished.WaitForNotification();
  t->finished.WaitForNotification();
  n->finished.WaitForNotification();
  EXPECT_TRUE(founder->result.ok()) << founder->result;
  EXPECT_TRUE(t->result.ok()) << t->result;
  EXPECT_TRUE(n->result.ok()) << n->result;
  ExpectEveryIteration(*founder, kIterations);
}

// Note [Evidence bans]: founder f (data node: it plans every route),
// trusted t (stage 1) and u (stage 2) from the allow-list, and newcomer n
// (stage 1) that scales every forward output x1.05, all signing their
// frames (Note [Checkable evidence]). f, the hop before stage 1, checks
// n's hops against t; u, the hop after n, is its only catcher: it condemns
// n and names it in its record's bans. One accuser: the quorum never takes
// n out of f's routes. f fetches u's evidence, checks it against n's and
// t's record keys with the real judge, adopts the ban, and routes no more
// micro-batches through n. The probation is longer than the run, so n is
// never vouched for (a trusted n would keep the quorum rule only).
TEST_F(OpenSwarmDaemonTest, ALoneCatchersEvidenceTakesALyingNewcomerOutOfThePlannersRoutes) {
  policy_.mode = membership::AdmissionMode::kOpen;
  policy_.founder_public_key = identity::TestIdentity('f')->public_key();
  policy_.allowed_ids = {identity::TestNodeId('t'), identity::TestNodeId('u')};
  policy_.join_work_bits = 10;
  policy_.manifest_id = std::string(64, 'e');
  policy_.probation_iterations = 1000;
  // Long enough for u's record with the ban to reach f by anti-entropy
  // when gossip's news missed f (a loaded machine): several push-pull
  // periods after the condemnation.
  constexpr int64_t kIterations = 150;

  const auto options = [&](const char* name, std::vector<int> stages, char seed) {
    GossipDaemonOptions o = Options(name, std::move(stages), seed);
    // News of a record goes to a few random members a few times; a full
    // exchange every half second brings f what it missed within the run.
    o.gossip.tuning.push_pull_interval = absl::Milliseconds(500);
    o.expect_members = 4;
    o.base.iterations = kIterations;
    o.base.metrics_port = 0;
    o.base.verify_rate = 1;
    o.base.sign_frames = true;
    return o;
  };
  auto founder = LaunchDaemon(options("f", {0}, 'f'));
  ASSERT_NE(founder, nullptr);
  const std::string bootstrap = founder->daemon->gossip_address();
  const auto joiner = [&](const char* name, int stage, char seed) {
    GossipDaemonOptions o = options(name, {stage}, seed);
    o.gossip.join = {bootstrap};
    return o;
  };
  std::unique_ptr<RunningDaemon> t = LaunchDaemon(joiner("t", 1, 't'));
  std::unique_ptr<RunningDaemon> u = LaunchDaemon(joiner("u", 2, 'u'));
  ASSERT_TRUE(t != nullptr && u != nullptr);
  NodeBackend lying = TorchNodeBackend();
  lying.create_compute = [inner = lying.create_compute](
                             const NodeDaemonOptions& o, int stage, TaskRunner* runner,
                             common::Clock* clock) -> absl::StatusOr<std::unique_ptr<StageCompute>> {
    absl::StatusOr<std::unique_ptr<StageCompute>> c = inner(o, stage, runner, clock);
    if (!c.ok()) return c;
    return std::make_unique<testing::LyingCompute>(*std::move(c),
                                                   testing::LyingCompute::Where::kForward,
                                                   testing::LyingCompute::Lie::kScale, 1.05);
  };
  std::unique_ptr<RunningDaemon> n = LaunchDaemonWith(joiner("n", 1, 'n'), std::move(lying));
  ASSERT_NE(n, nullptr);
  // n's forwards as of its report for `iteration` (cumulative); -1 if n
  // finished without reporting it.
  const auto n_forwards_at = [&](int64_t iteration) -> int64_t {
    while (!n->WaitForIteration(iteration, absl::Milliseconds(100))) {
      if (n->finished.HasBeenNotified()) break;
    }
    absl::MutexLock lock(&n->mu);
    for (const NodeIterationReport& r : n->reports) {
      if (static_cast<int64_t>(r.iteration) >= iteration) return r.server.forwards;
    }
    return -1;
  };

  // u condemns n (its own verdicts), alone.
  const int64_t condemned_at = UntilEachIteration(*founder, [&] {
    return Gauge(u->daemon->metrics_port(), "skipswarm_verify_excluded") >= 1;
  });
  ASSERT_GE(condemned_at, 0) << "u never condemned n";
  // f fetches u's evidence and adopts the ban. Seen with f's last finished
  // iteration before `adopted_at`: every iteration from adopted_at + 1 on
  // is planned after the adoption. (Not "n's forwards stopped": the
  // planner may route around a slow n for a while, and n's own reports may
  // lag f's; neither is the ban.)
  const int64_t adopted_at = UntilEachIteration(*founder, [&] {
    return Gauge(founder->daemon->metrics_port(), "skipswarm_evidence_bans_adopted_total") >= 1;
  });
  const double fetches = Gauge(founder->daemon->metrics_port(), "skipswarm_evidence_fetches_total");
  const double served = Gauge(u->daemon->metrics_port(), "skipswarm_evidence_served_total");
  ASSERT_GE(adopted_at, 0)
      << "f never adopted u's ban after " << fetches << " fetch(es) ("
      << Gauge(founder->daemon->metrics_port(), "skipswarm_evidence_fetch_failures_total")
      << " failed); u served " << served;
  ASSERT_LT(adopted_at + 2, kIterations - 5) << "adopted too late to see n out of the routes";
  EXPECT_EQ(Gauge(founder->daemon->metrics_port(), "skipswarm_evidence_bans_adopted_total"), 1);
  EXPECT_GE(served, 1);
  // n is still a live member on probation (banned, not dead).
  EXPECT_EQ(Gauge(founder->daemon->metrics_port(), "skipswarm_members_on_probation"), 1);
  // n's forwards through iteration adopted_at + 1 (micro-batches routed
  // before the adoption may still finish there; one iteration of slack for
  // a plan made while the fetch was judged) are all it ever does.
  const int64_t before_ban = n_forwards_at(adopted_at + 1);
  ASSERT_GE(before_ban, 0) << "n never reported iteration " << adopted_at + 1;
  n->finished.WaitForNotification();
  int64_t in_all = -1;
  {
    absl::MutexLock lock(&n->mu);
    if (!n->reports.empty()) in_all = n->reports.back().server.forwards;
  }
  EXPECT_EQ(in_all, before_ban) << "n got micro-batches after f adopted the ban";
  std::printf("FIGURE evidence ban: u condemned n by founder iteration %lld; f adopted the ban "
              "by %lld after %g fetch(es), u served %g; n's forwards %lld through iteration %lld, "
              "%lld in all\n",
              static_cast<long long>(condemned_at), static_cast<long long>(adopted_at), fetches,
              served, static_cast<long long>(before_ban), static_cast<long long>(adopted_at + 1),
              static_cast<long long>(in_all));

  founder->finished.WaitForNotification();
  for (RunningDaemon* d : {t.get(), u.get(), n.get()}) d->finished.WaitForNotification();
  EXPECT_TRUE(founder->result.ok()) << founder->result;
  for (RunningDaemon* d : {t.get(), u.get(), n.get()}) EXPECT_TRUE(d->result.ok()) << d->result;
  ExpectEveryIteration(*founder, kIterations);
}

}  // namespace
}  // namespace skipswarm::node
