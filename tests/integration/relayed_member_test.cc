// A member that cannot be dialed hosts a stage through relays (Note
// [Relayed members], node/daemon/gossip/gossip_daemon_relay.cc): four
// GossipDaemons in one process over loopback gRPC (ports 0, plain text);
// three reachable founders host stages 0, 1, 2 and train; a joiner enters
// as a second replica of stage 1 while advertising an address where
// nothing listens (like a home node behind NAT: its reachability check
// fails). It attaches to relays, names them in its record, fetches its
// state and trains: micro-batches reach it through the relays, its digest
// matches its replica's, and no micro-batch is dropped after its entry.
// A second test holds the joiner's relays back and checks that it enters
// only with them (Note [Relayed entry]).
// Tiny model; waits on notifications, no sleeps.
#include <cstdio>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/free_port.h"
#include "gtest/gtest.h"
#include "tests/integration/running_daemon.h"
#include "tests/integration/tiny_gossip_options.h"
#include "node/daemon/gossip/gossip_daemon.h"

namespace skipswarm::node {
namespace {

class RelayedMemberTest : public ::testing::Test {
 protected:
  void SetUp() override {
    corpus_ = ::testing::TempDir() + "/corpus.txt";
    WriteTinyCorpus(corpus_, "the swarm trains line ", " of a tiny corpus");
  }

  GossipDaemonOptions Options(const std::string& name, std::vector<int> stages) {
    // In-order routes with round-robin replicas: both stage-1 replicas get
    // micro-batches in every iteration.
    GossipDaemonOptions o =
        TinyGossipOptions(name, std::move(stages), corpus_, "relayed-member-test");
    o.base.iterations = kIterations;
    o.base.mbs_per_iteration = 4;
    o.expect_members = 3;
    // A dial-back to a port where nothing listens fails at its deadline.
    o.dial_back_timeout = absl::Milliseconds(300);
    return o;
  }

  // `trained` once it finished 5 iterations.
  std::unique_ptr<RunningDaemon> Launch(GossipDaemonOptions o) {
    return LaunchDaemon(std::move(o), /*reach=*/-1, /*train=*/5);
  }

  // Enough for the joiner to enter while the founders train (its
  // reachability check waits out the dial-backs' deadline first) and then
  // train a while.
  static constexpr int64_t kIterations = 300;
  std::string corpus_;
};

TEST_F(RelayedMemberTest, AMemberNobodyCanDialHostsAReplicaThroughRelays) {
  GossipDaemonOptions d0 = Options("d0", {0});
  d0.base.listen = "127.0.0.1:0";
  auto founder = Launch(d0);
  ASSERT_NE(founder, nullptr);
  const std::string bootstrap = founder->daemon->gossip_address();
  std::vector<std::unique_ptr<RunningDaemon>> others;
  for (auto [name, stage] : {std::pair<const char*, int>{"a", 1}, {"b", 2}}) {
    GossipDaemonOptions o = Options(name, {stage});
    o.gossip.join = {bootstrap};
    others.push_back(Launch(o));
    ASSERT_NE(others.back(), nullptr);
  }
  ASSERT_TRUE(others[0]->WaitUnlessFinished(others[0]->trained)) << others[0]->result;
  // The home node joins: it listens on a port of its own but advertises
  // one where nothing listens, so every dial-back fails.
  absl::StatusOr<int> dead = common::FreeLoopbackPort();
  ASSERT_TRUE(dead.ok()) << dead.status();
  GossipDaemonOptions h = Options("h", {1});
  h.expect_members = 0;
  // Far enough ahead that its replica is not past the entry when the state
  // request comes (a re-announced entry races the data node's local dead
  // verdict about the joiner, which this test is not about).
  h.entry_lead = 20;
  h.gossip.join = {bootstrap};
  h.advertise = absl::StrCat("127.0.0.1:", *dead);
  auto home = Launch(h);
  ASSERT_NE(home, nullptr);

  founder->Join();
  for (auto& r : others) r->Join();
  home->Join();
  EXPECT_TRUE(founder->result.ok()) << founder->result;
  for (auto& r : others) EXPECT_TRUE(r->result.ok()) << r->result;
  EXPECT_TRUE(home->result.ok()) << home->result;

  // Its record: outbound-only, relayed by reachable members.
  const membership::View view = founder->daemon->view();
  const membership::MemberInfo* hm = nullptr;
  for (const membership::MemberInfo& m : view.members) {
    if (m.addresses.size() > 0 && m.addresses[0] == h.advertise) hm = &m;
  }
  ASSERT_NE(hm, nullptr);
  EXPECT_TRUE(hm->outbound_only);
  EXPECT_FALSE(hm->relays.empty());

  int home_visits = 0;
  std::map<uint64_t, uint64_t> home_digests;
  uint64_t entry = 0;
  {
    absl::MutexLock lock(&home->mu);
    ASSERT_GE(home->reports.size(), 20u);
    entry = home->reports.front().iteration;
    for (const NodeIterationReport& r : home->reports) {
      home_visits += r.stages.at(1).visits_here;
      home_digests[r.iteration] = r.stages.at(1).digest_after;
    }
  }
  ::testing::Test::RecordProperty("home_visits", home_visits);
  const int trained = static_cast<int>(kIterations - entry);
  std::printf("home node: %d stage-1 visits in its %d iterations (entry %d)\n", home_visits,
              trained, static_cast<int>(entry));
  // Its share of stage 1: round-robin routes give it half the 4
  // micro-batches of each iteration.
  EXPECT_GE(home_visits, trained * 2 - 4);
  {
    absl::MutexLock lock(&others[0]->mu);  // a: stage 1's other replica
    for (const NodeIterationReport& r : others[0]->reports) {
      if (r.iteration < entry) continue;
      EXPECT_EQ(r.stages.at(1).digest_after, home_digests[r.iteration]) << r.iteration;
    }
  }
  absl::MutexLock lock(&founder->mu);
  int dropped = 0;
  for (const NodeIterationReport& r : founder->reports) {
    if (r.data && r.iteration >= entry) dropped += r.data->dropped;
  }
  EXPECT_EQ(dropped, 0);
}

// Note [Relayed entry] (gossip_daemon_relay.cc): a joiner behind NAT enters
// only in the record that names its relays. The test holds the joiner's
// relay attacher (relay_attach_gate) and lets it go only when the joiner
// could have done harm without relays: once stage 1's other replica has
// finished the entry iteration the joiner announced (old code announced
// without relays: that replica's first push to it found no relay, the
// joiner then waited at its entry for good and never trained), or, when no
// entry came, 30 of that replica's iterations after the joiner's record
// went outbound-only (the joiner waits for its relays). Either way the
// joiner must then train its full share, in step with its replica. The
// release is driven by the replica's iteration reports, not by time.
TEST_F(RelayedMemberTest, AJoinerBehindNatEntersOnlyOnceItsRelaysAreKnown) {
  GossipDaemonOptions d0 = Options("d0", {0});
  d0.base.listen = "127.0.0.1:0";
  auto founder = Launch(d0);
  ASSERT_NE(founder, nullptr);
  const std::string bootstrap = founder->daemon->gossip_address();
  absl::StatusOr<int> dead = common::FreeLoopbackPort();
  ASSERT_TRUE(dead.ok()) << dead.status();
  const std::string home_address = absl::StrCat("127.0.0.1:", *dead);

  // Set up before `a` runs: its observer reads them.
  absl::Notification gate;
  absl::Mutex gate_mu;
  int64_t armed_at = -1;           // a's iteration when h showed up outbound-only
  uint64_t announced_entry = 0;    // h's entry as a saw it at the release (0: none)
  GossipDaemon* a_daemon = nullptr;
  std::vector<std::unique_ptr<RunningDaemon>> others;
  for (auto [name, stage] : {std::pair<const char*, int>{"a", 1}, {"b", 2}}) {
    GossipDaemonOptions o = Options(name, {stage});
    o.gossip.join = {bootstrap};
    if (stage == 1) {
      o.observer = [&](const NodeIterationReport& r) {
        absl::MutexLock lock(&gate_mu);
        if (gate.HasBeenNotified() || a_daemon == nullptr) return;
        const membership::View view = a_daemon->view();
        for (const membership::MemberInfo& m : view.members) {
          if (m.addresses.empty() || m.addresses[0] != home_address || !m.outbound_only) continue;
          if (armed_at < 0) armed_at = static_cast<int64_t>(r.iteration);
          const bool entered = !m.stages.empty() && m.iteration > 0;
          if ((entered && r.iteration >= m.iteration) ||
              (!entered && static_cast<int64_t>(r.iteration) >= armed_at + 30)) {
            announced_entry = entered ? m.iteration : 0;
            gate.Notify();
          }
        }
      };
    }
    others.push_back(Launch(o));
    ASSERT_NE(others.back(), nullptr);
    if (stage == 1) {
      absl::MutexLock lock(&gate_mu);
      a_daemon = others.back()->daemon.get();
    }
  }
  ASSERT_TRUE(others[0]->WaitUnlessFinished(others[0]->trained)) << others[0]->result;
  GossipDaemonOptions h = Options("h", {1});
  h.expect_members = 0;
  h.entry_lead = 1;  // the default: no slack for relays learned late
  h.gossip.join = {bootstrap};
  h.advertise = home_address;
  h.relay_attach_gate = &gate;
  h.stop_timeout = absl::Seconds(5);
  auto home = Launch(h);
  ASSERT_NE(home, nullptr);

  founder->Join();
  for (auto& r : others) r->Join();
  // A joiner stuck at its entry would wait for a barrier nobody sends.
  home->signals.stop = true;
  home->Join();
  {
    absl::MutexLock lock(&gate_mu);
    a_daemon = nullptr;
    std::printf("relay gate released %s (entry announced before it: %d)\n",
                gate.HasBeenNotified() ? "yes" : "no", static_cast<int>(announced_entry));
    EXPECT_TRUE(gate.HasBeenNotified());
    // The entry came only with the relays.
    EXPECT_EQ(announced_entry, 0u);
  }
  EXPECT_TRUE(founder->result.ok()) << founder->result;
  EXPECT_TRUE(home->result.ok()) << home->result;

  std::map<uint64_t, uint64_t> home_digests;
  int home_visits = 0;
  uint64_t entry = 0;
  {
    absl::MutexLock lock(&home->mu);
    ASSERT_GE(home->reports.size(), 20u) << "the joiner did not train";
    entry = home->reports.front().iteration;
    for (const NodeIterationReport& r : home->reports) {
      home_visits += r.stages.at(1).visits_here;
      home_digests[r.iteration] = r.stages.at(1).digest_after;
    }
  }
  const int trained = static_cast<int>(kIterations - entry);
  std::printf("home node: %d stage-1 visits in its %d iterations (entry %d)\n", home_visits,
              trained, static_cast<int>(entry));
  EXPECT_GE(home_visits, trained * 2 - 4);
  absl::MutexLock lock(&others[0]->mu);
  for (const NodeIterationReport& r : others[0]->reports) {
    if (r.iteration < entry) continue;
    EXPECT_EQ(r.stages.at(1).digest_after, home_digests[r.iteration]) << r.iteration;
  }
}

}  // namespace
}  // namespace skipswarm::node
