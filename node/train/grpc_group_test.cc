#include "node/train/grpc_group.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/free_port.h"
#include "common/real_clock.h"
#include "common/sim_clock.h"
#include "gtest/gtest.h"
#include "node/train/sharded_reduce.h"

namespace skipswarm::node {
namespace {

using common::NodeId;

// Note [Patience in the gRPC group tests]
// These tests run real gRPC over loopback, so how long anything takes is
// up to the machine: ThreadSanitizer slows them 5-15x, and a loaded
// machine more (tools/concurrency_check.sh --grpc). No case depends on how
// fast it is:
// - every wait for something that must happen, and every real-time limit
//   the code under test sees (push deadline, probe timeout, retries), is
//   kPatience: it only bounds a hang, never decides an outcome;
// - the cases on the simulated clock move time only at points the case
//   names, after the pushes it waits for are in (SimDriver), never on a
//   real-time schedule: time standing still, a round deadline cannot pass
//   while a push is still crossing loopback.
// A wait that must NOT end (the negative checks) may be short: a slow
// machine only makes it pass more easily.
constexpr absl::Duration kPatience = absl::Seconds(60);

// The real-time limits of GrpcGroupOptions, as long as kPatience: a slow
// push or probe is not a death here; deaths in these tests are refused
// connections, which fail at once.
void BePatient(GrpcGroupOptions& o) {
  o.push_deadline = kPatience;
  o.probe_timeout = kPatience;
}

// Runs a SimClock for the cases below (Note [Patience in the gRPC group
// tests]): time moves only in AdvanceTo; Until fires the timers already due,
// with time standing still, while real gRPC threads make progress.
class SimDriver {
 public:
  explicit SimDriver(common::SimClock* clock) : clock_(clock) {}

  // True once `done` holds; false after kPatience of real time.
  bool Until(const std::function<bool()>& done) {
    absl::Notification never;
    for (absl::Duration waited; waited < kPatience; waited += kPoll) {
      clock_->RunDue();
      if (done()) return true;
      never.WaitForNotificationWithTimeout(kPoll);  // real time: loopback
    }
    clock_->RunDue();
    return done();
  }
  bool Until(absl::Notification& n) { return Until([&n] { return n.HasBeenNotified(); }); }

  // Moves time to `t` in `step`s, firing the timers due on the way; stops
  // early once `n` is notified.
  void AdvanceTo(absl::Duration t, absl::Duration step, const absl::Notification* n = nullptr) {
    while (clock_->SteadyNow() < t && (n == nullptr || !n->HasBeenNotified())) {
      clock_->AdvanceTo(std::min(t, clock_->SteadyNow() + step));
    }
  }

 private:
  static constexpr absl::Duration kPoll = absl::Milliseconds(2);
  common::SimClock* clock_;
};

// Three nodes on loopback: n0 a data node, n1 and n2 replicas of stage 1.
class GrpcGroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    clock_ = common::RealClock::Create();
    std::vector<int> stages = {0, 1, 1};
    std::vector<std::unique_ptr<GrpcGroupComm>> groups;
    // Servers first (port 0), then views with the discovered addresses.
    for (int i = 0; i < 3; ++i) ids_.push_back(NodeId::ForName("g" + std::to_string(i)));
    std::vector<PeerInfo> members;
    for (int i = 0; i < 3; ++i) members.push_back({ids_[i], {stages[i]}, 4, "", ""});
    for (int i = 0; i < 3; ++i) {
      views_.push_back(std::make_unique<StaticSwarmView>(members));
    }
    for (int i = 0; i < 3; ++i) {
      GrpcGroupOptions o;
      o.self = ids_[i];
      BePatient(o);
      o.credentials = identity::PeerCredentials::Insecure();  // TLS: grpc_group_tls_test
      auto g = GrpcGroupComm::Create(o, views_[i].get(), clock_.get());
      ASSERT_TRUE(g.ok()) << g.status();
      groups_.push_back(*std::move(g));
    }
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) {
        views_[i]->SetAddresses(ids_[j], "", "127.0.0.1:" + std::to_string(groups_[j]->port()));
      }
    }
  }
  void TearDown() override {
    groups_.clear();
    views_.clear();
  }

  std::unique_ptr<common::RealClock> clock_;
  std::vector<NodeId> ids_;
  std::vector<std::unique_ptr<StaticSwarmView>> views_;
  std::vector<std::unique_ptr<GrpcGroupComm>> groups_;
};

TEST_F(GrpcGroupTest, BarrierThenAllReduceGivesEqualSums) {
  ASSERT_TRUE(groups_[1]->AwaitPeers(kPatience).ok());
  absl::Notification b1, b2;
  groups_[1]->Barrier(0, ids_[1], false, [&](absl::Status s) { EXPECT_TRUE(s.ok()); b1.Notify(); });
  groups_[2]->Barrier(0, ids_[2], false, [&](absl::Status s) { EXPECT_TRUE(s.ok()); b2.Notify(); });
  EXPECT_FALSE(b1.WaitForNotificationWithTimeout(absl::Milliseconds(100)));
  absl::Notification b0;
  groups_[0]->Barrier(0, ids_[0], true, [&](absl::Status) { b0.Notify(); });
  ASSERT_TRUE(b0.WaitForNotificationWithTimeout(kPatience));
  ASSERT_TRUE(b1.WaitForNotificationWithTimeout(kPatience));
  ASSERT_TRUE(b2.WaitForNotificationWithTimeout(kPatience));

  // 300k elements: more than one 1 MiB chunk.
  const size_t n = 300000;
  std::optional<absl::StatusOr<ReduceResult>> r1, r2;
  absl::Notification d1, d2;
  GradientContribution c1{ids_[1], std::vector<float>(n, 1.5f), 3, 42, nullptr};
  GradientContribution c2{ids_[2], std::vector<float>(n, 0.25f), 1, 42, nullptr};
  c2.flat[n - 1] = 2.0f;
  groups_[1]->AllReduce(0, 1, c1, [&](absl::StatusOr<ReduceResult> r) { r1 = r; d1.Notify(); });
  groups_[2]->AllReduce(0, 1, c2, [&](absl::StatusOr<ReduceResult> r) { r2 = r; d2.Notify(); });
  ASSERT_TRUE(d1.WaitForNotificationWithTimeout(kPatience));
  ASSERT_TRUE(d2.WaitForNotificationWithTimeout(kPatience));
  ASSERT_TRUE(r1->ok() && r2->ok());
  EXPECT_EQ((*r1)->visits, 4);
  EXPECT_EQ((*r1)->contributors, 2);
  EXPECT_TRUE((*r1)->digests_agree);
  EXPECT_EQ((*r1)->sum, (*r2)->sum);
  EXPECT_FLOAT_EQ((*r1)->sum[0], 1.75f);
  EXPECT_FLOAT_EQ((*r1)->sum[n - 1], 3.5f);
}

// Ports are exclusive (gRPC's SO_REUSEPORT off): a second group server on
// a taken port fails with an error naming the flag.
TEST_F(GrpcGroupTest, ASecondServerOnTheSamePortFailsNamingTheFlag) {
  GrpcGroupOptions o;
  o.self = NodeId::ForName("g9");
  o.listen_address = "127.0.0.1:" + std::to_string(groups_[1]->port());
  o.credentials = identity::PeerCredentials::Insecure();
  auto second = GrpcGroupComm::Create(o, views_[1].get(), clock_.get());
  ASSERT_FALSE(second.ok()) << "two servers listen on " << o.listen_address;
  EXPECT_NE(second.status().message().find("--group_listen"), std::string::npos)
      << second.status();
}

TEST_F(GrpcGroupTest, DeadReplicaIsDroppedFromTheReduce) {
  // n2 is gone: its server stops; n1's push fails and n1 finishes alone.
  groups_[2].reset();
  std::optional<absl::StatusOr<ReduceResult>> r1;
  absl::Notification d1;
  groups_[1]->AllReduce(0, 1, {ids_[1], std::vector<float>(10, 1.f), 2, 7, nullptr},
                        [&](absl::StatusOr<ReduceResult> r) { r1 = r; d1.Notify(); });
  ASSERT_TRUE(d1.WaitForNotificationWithTimeout(kPatience));
  ASSERT_TRUE(r1->ok());
  EXPECT_EQ((*r1)->contributors, 1);
  EXPECT_EQ((*r1)->visits, 2);
}

}  // namespace
}  // namespace skipswarm::node

namespace skipswarm::node {
namespace {

// Note [Retried pushes]: n1 reaches n2 through a relay; the path dies (n1's
// view points at a port where nothing listens) and comes back (a
// re-attach: the right address again). n1's push to n2 is tried again
// instead of dropping n2, so both finish the round together.
TEST(GrpcGroupRetryTest, APushToARelayedMemberIsTriedAgainInsteadOfDroppingIt) {
  auto clock = common::RealClock::Create();
  const NodeId n1 = NodeId::ForName("r1"), n2 = NodeId::ForName("r2");
  std::vector<PeerInfo> members = {{n1, {1}, 4, "", ""}, {n2, {1}, 4, "", ""}};
  StaticSwarmView v1(members), v2(members);
  auto make = [&](const NodeId& self, StaticSwarmView* view) {
    GrpcGroupOptions o;
    o.self = self;
    BePatient(o);
    o.credentials = identity::PeerCredentials::Insecure();
    o.retry_pushes_to = [n2](const NodeId& id) { return id == n2; };
    o.push_retry_every = absl::Milliseconds(100);
    o.push_retries = static_cast<int>(kPatience / o.push_retry_every);
    o.probe_failures = 100;  // this test is about pushes
    return GrpcGroupComm::Create(o, view, clock.get());
  };
  auto g1 = make(n1, &v1);
  auto g2 = make(n2, &v2);
  ASSERT_TRUE(g1.ok() && g2.ok());
  auto nothing = GrpcGroupComm::Create(
      [&] {
        GrpcGroupOptions o;
        o.self = NodeId::ForName("r9");
        o.credentials = identity::PeerCredentials::Insecure();
        return o;
      }(),
      &v1, clock.get());
  ASSERT_TRUE(nothing.ok());
  const std::string dead = "127.0.0.1:" + std::to_string((*nothing)->port());
  nothing->reset();  // its port now refuses connections
  v1.SetAddresses(n2, "", dead);
  v2.SetAddresses(n1, "", "127.0.0.1:" + std::to_string((*g1)->port()));
  std::optional<absl::StatusOr<ReduceResult>> r1, r2;
  absl::Notification d1, d2;
  (*g1)->AllReduce(0, 1, {n1, std::vector<float>(10, 1.f), 2, 7},
                   [&](absl::StatusOr<ReduceResult> r) { r1 = r; d1.Notify(); });
  // Old behaviour: the failed push dropped n2 and n1 finished alone here.
  EXPECT_FALSE(d1.WaitForNotificationWithTimeout(absl::Milliseconds(500)));
  v1.SetAddresses(n2, "", "127.0.0.1:" + std::to_string((*g2)->port()));
  (*g2)->AllReduce(0, 1, {n2, std::vector<float>(10, 3.f), 2, 7},
                   [&](absl::StatusOr<ReduceResult> r) { r2 = r; d2.Notify(); });
  ASSERT_TRUE(d1.WaitForNotificationWithTimeout(kPatience));
  ASSERT_TRUE(d2.WaitForNotificationWithTimeout(kPatience));
  ASSERT_TRUE(r1->ok() && r2->ok());
  EXPECT_EQ((*r1)->contributors, 2);
  EXPECT_EQ((*r2)->contributors, 2);
  EXPECT_EQ((*r1)->sum, (*r2)->sum);
  EXPECT_TRUE(v1.IsAlive(n2));
}

TEST_F(GrpcGroupTest, ReplicaThatDiesAfterItsPeerPushedIsProbedAndDropped) {
  // n1 contributes and pushes to n2 (alive, so the push succeeds); n2 then
  // dies without contributing. Only the liveness probe can tell n1.
  std::optional<absl::StatusOr<ReduceResult>> r1;
  absl::Notification d1;
  groups_[1]->AllReduce(0, 1, {ids_[1], std::vector<float>(10, 1.f), 2, 7, nullptr},
                        [&](absl::StatusOr<ReduceResult> r) { r1 = r; d1.Notify(); });
  EXPECT_FALSE(d1.WaitForNotificationWithTimeout(absl::Milliseconds(300)));
  groups_[2].reset();
  ASSERT_TRUE(d1.WaitForNotificationWithTimeout(kPatience));
  ASSERT_TRUE(r1->ok());
  EXPECT_EQ((*r1)->contributors, 1);
}

}  // namespace
}  // namespace skipswarm::node

namespace skipswarm::node {
namespace {

// Four replicas of one stage on loopback; one dies right after it starts
// its part of the reduce. The three survivors all finish, none hangs.
TEST(GrpcGroupShardedTest, SurvivorsOfAReplicaDyingMidWayAgree) {
  auto clock = common::RealClock::Create();
  std::vector<PeerInfo> members;
  for (int i = 0; i < 4; ++i) {
    members.push_back({NodeId::ForName("s" + std::to_string(i)), {1}, 4, "", ""});
  }
  std::vector<std::unique_ptr<StaticSwarmView>> views;
  std::vector<std::unique_ptr<GrpcGroupComm>> groups;
  for (int i = 0; i < 4; ++i) {
    views.push_back(std::make_unique<StaticSwarmView>(members));
    GrpcGroupOptions o;
    o.self = members[i].id;
    BePatient(o);
    o.credentials = identity::PeerCredentials::Insecure();
    auto g = GrpcGroupComm::Create(o, views.back().get(), clock.get());
    ASSERT_TRUE(g.ok()) << g.status();
    groups.push_back(*std::move(g));
  }
  for (auto& v : views) {
    for (int j = 0; j < 4; ++j) {
      v->SetAddresses(members[j].id, "", "127.0.0.1:" + std::to_string(groups[j]->port()));
    }
  }
  const size_t n = 600000;  // shards of 150k floats: more than one chunk each
  std::vector<std::optional<absl::StatusOr<ReduceResult>>> results(4);
  std::vector<std::unique_ptr<absl::Notification>> done;
  for (int i = 0; i < 4; ++i) done.push_back(std::make_unique<absl::Notification>());
  for (int i : {0, 1, 2, 3}) {
    GradientContribution c{members[i].id, std::vector<float>(n, 0.5f * (i + 1)), i + 1, 9, nullptr};
    groups[i]->AllReduce(0, 1, std::move(c), [&, i](absl::StatusOr<ReduceResult> r) {
      results[i] = r;
      done[i]->Notify();
    });
    if (i == 3) groups[3].reset();  // dies with its pushes half done
  }
  for (int i : {0, 1, 2}) {
    ASSERT_TRUE(done[i]->WaitForNotificationWithTimeout(kPatience)) << i;
    ASSERT_TRUE(results[i]->ok()) << results[i]->status();
  }
  // Usually all three redo the round without s3. If s3's all-gather shard
  // reached some of them before it died, those finish the 4-member round
  // while one that saw s3 fail first finishes without it: each result is
  // then consistent in itself, and the next reduce's digests tell them
  // apart (Note [Gradient exchange]; repaired by Note [Digest re-sync]).
  for (int i : {0, 1, 2}) {
    const ReduceResult& r = **results[i];
    ASSERT_TRUE(r.contributors == 3 || r.contributors == 4) << r.contributors;
    const bool without = r.contributors == 3;
    EXPECT_EQ(r.visits, without ? 1 + 2 + 3 : 1 + 2 + 3 + 4);
    EXPECT_TRUE(r.digests_agree);
    EXPECT_FLOAT_EQ(r.sum[0], without ? 3.0f : 5.0f);
    EXPECT_FLOAT_EQ(r.sum[n - 1], without ? 3.0f : 5.0f);
    for (int j : {0, 1, 2}) {
      if ((*results[j])->contributors == r.contributors) {
        EXPECT_EQ(r.sum, (*results[j])->sum);
      }
    }
  }
}

}  // namespace
}  // namespace skipswarm::node

namespace skipswarm::node {
namespace {

// Three replicas with uplink figures 10 / 10 / 2 MB/s (given, not
// measured): the first round has no figures yet (equal shards) and hands
// them to everyone; the second is cut by them (Note [Shard layout]); its
// sums are the same bytes as the first's (same contributions); a third
// round loses a member mid-way and the survivors finish on their own cut.
TEST(GrpcGroupShardedTest, SecondRoundIsCutByTheFiguresTheFirstHandedBack) {
  auto clock = common::RealClock::Create();
  const std::vector<uint64_t> uplinks = {10'000'000, 10'000'000, 2'000'000};
  std::vector<PeerInfo> members;
  for (int i = 0; i < 3; ++i) {
    members.push_back({NodeId::ForName("u" + std::to_string(i)), {1}, 4, "", ""});
  }
  std::vector<std::unique_ptr<StaticSwarmView>> views;
  std::vector<std::unique_ptr<GrpcGroupComm>> groups;
  for (int i = 0; i < 3; ++i) {
    views.push_back(std::make_unique<StaticSwarmView>(members));
    GrpcGroupOptions o;
    o.self = members[i].id;
    BePatient(o);
    o.credentials = identity::PeerCredentials::Insecure();
    o.uplink_bytes_per_second = [b = uplinks[i]] { return b; };
    auto g = GrpcGroupComm::Create(o, views.back().get(), clock.get());
    ASSERT_TRUE(g.ok()) << g.status();
    groups.push_back(*std::move(g));
  }
  for (auto& v : views) {
    for (int j = 0; j < 3; ++j) {
      v->SetAddresses(members[j].id, "", "127.0.0.1:" + std::to_string(groups[j]->port()));
    }
  }
  // members sorted by id in the round; the expected cut follows that order.
  std::vector<int> order = {0, 1, 2};
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return members[a].id < members[b].id; });
  std::vector<uint64_t> by_id;
  for (int i : order) by_id.push_back(uplinks[i]);
  const std::vector<uint32_t> sized = ShardLayout::FromBandwidths(by_id).weights;
  ASSERT_FALSE(sized.empty());

  const size_t n = 300001;
  auto round = [&](uint64_t it, const std::vector<int>& who,
                   int dies) -> std::vector<std::optional<absl::StatusOr<ReduceResult>>> {
    std::vector<std::optional<absl::StatusOr<ReduceResult>>> results(3);
    std::vector<std::unique_ptr<absl::Notification>> done;
    for (int i = 0; i < 3; ++i) done.push_back(std::make_unique<absl::Notification>());
    for (int i : who) {
      std::vector<float> flat(n);
      for (size_t k = 0; k < n; ++k) flat[k] = 0.1f * (i + 1) + 1e-6f * static_cast<float>(k);
      groups[i]->AllReduce(it, 1, {members[i].id, std::move(flat), i + 1, 5, nullptr},
                           [&results, &done, i](absl::StatusOr<ReduceResult> r) {
                             results[i] = r;
                             done[i]->Notify();
                           });
      if (i == dies) groups[i].reset();
    }
    for (int i : who) {
      if (i == dies) continue;
      EXPECT_TRUE(done[i]->WaitForNotificationWithTimeout(kPatience)) << i;
    }
    return results;
  };
  auto first = round(0, {0, 1, 2}, -1);
  auto second = round(1, {0, 1, 2}, -1);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(first[i].has_value() && first[i]->ok());
    ASSERT_TRUE(second[i].has_value() && second[i]->ok());
    EXPECT_TRUE((*first[i])->shard_weights.empty());
    EXPECT_EQ((*second[i])->shard_weights, sized);
    EXPECT_FALSE((*second[i])->layout_adopted);
    EXPECT_EQ((*second[i])->sum, (*first[0])->sum);  // bitwise
  }
  // Round three: the slow member (index 2) dies as it starts.
  auto third = round(2, {0, 1, 2}, 2);
  for (int i : {0, 1}) {
    ASSERT_TRUE(third[i].has_value() && third[i]->ok());
    const ReduceResult& r = **third[i];
    ASSERT_TRUE(r.contributors == 2 || r.contributors == 3) << r.contributors;
    if (r.contributors == 2) {
      EXPECT_EQ(r.visits, 1 + 2);
      // 10 and 10 MB/s: equal figures are the equal cut.
      EXPECT_TRUE(r.shard_weights.empty());
    }
  }
}

// Note [Shard layout]: two replicas whose last finished rounds differ, as
// after a re-entry under --outer_overlap: both average round 0 (figures
// handed back), then the second replica (by id) redoes round 1 alone (its
// view has the first paused) and keeps only its own figure, so for round
// 2 it cuts equal shards while the first cuts by round 0's figures. They
// end on the first's cut (before: both fell back to equal shards).
TEST(GrpcGroupShardedTest, ReplicasWhoseFiguresDifferEndOnTheFirstMembersCut) {
  auto clock = common::RealClock::Create();
  std::vector<PeerInfo> members;
  for (int i = 0; i < 2; ++i) {
    members.push_back({NodeId::ForName("f" + std::to_string(i)), {1}, 4, "", ""});
  }
  std::sort(members.begin(), members.end(),
            [](const PeerInfo& a, const PeerInfo& b) { return a.id < b.id; });
  const std::vector<uint64_t> uplinks = {10'000'000, 2'000'000};  // by id
  std::vector<std::unique_ptr<StaticSwarmView>> views;
  std::vector<std::unique_ptr<GrpcGroupComm>> groups;
  for (int i = 0; i < 2; ++i) {
    views.push_back(std::make_unique<StaticSwarmView>(members));
    GrpcGroupOptions o;
    o.self = members[i].id;
    BePatient(o);
    o.credentials = identity::PeerCredentials::Insecure();
    o.uplink_bytes_per_second = [b = uplinks[i]] { return b; };
    auto g = GrpcGroupComm::Create(o, views.back().get(), clock.get());
    ASSERT_TRUE(g.ok()) << g.status();
    groups.push_back(*std::move(g));
  }
  for (auto& v : views) {
    for (int j = 0; j < 2; ++j) {
      v->SetAddresses(members[j].id, "", "127.0.0.1:" + std::to_string(groups[j]->port()));
    }
  }
  const std::vector<uint32_t> sized = ShardLayout::FromBandwidths(uplinks).weights;
  ASSERT_FALSE(sized.empty());
  const size_t n = 100001;
  auto round = [&](uint64_t it, const std::vector<int>& who) {
    std::vector<std::optional<absl::StatusOr<ReduceResult>>> results(2);
    std::vector<std::unique_ptr<absl::Notification>> done;
    for (int i = 0; i < 2; ++i) done.push_back(std::make_unique<absl::Notification>());
    for (int i : who) {
      std::vector<float> flat(n);
      for (size_t k = 0; k < n; ++k) flat[k] = 0.25f * (i + 1) + 1e-6f * static_cast<float>(k);
      groups[i]->AllReduce(it, 1, {members[i].id, std::move(flat), 1, 5, nullptr},
                           [&results, &done, i](absl::StatusOr<ReduceResult> r) {
                             results[i] = r;
                             done[i]->Notify();
                           });
    }
    for (int i : who) EXPECT_TRUE(done[i]->WaitForNotificationWithTimeout(kPatience)) << i;
    return results;
  };
  auto first = round(0, {0, 1});
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(first[i].has_value() && first[i]->ok()) << i;
  views[1]->SetPaused(members[0].id, true);
  auto alone = round(1, {1});
  ASSERT_TRUE(alone[1].has_value() && alone[1]->ok());
  ASSERT_EQ((*alone[1])->contributors, 1);
  views[1]->SetPaused(members[0].id, false);
  auto third = round(2, {0, 1});
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(third[i].has_value() && third[i]->ok()) << i;
    EXPECT_EQ((*third[i])->contributors, 2);
    EXPECT_EQ((*third[i])->shard_weights, sized) << i;
    EXPECT_EQ((*third[i])->sum, (*first[0])->sum) << i;  // the same contributions
  }
  EXPECT_FALSE((*third[0])->layout_adopted);
  EXPECT_TRUE((*third[1])->layout_adopted);
}

}  // namespace
}  // namespace skipswarm::node

namespace skipswarm::node {
namespace {

// The success path of a state request: the provider's bytes (more than one
// 1 MiB chunk) arrive whole, and the serving replica is still alive after.
TEST_F(GrpcGroupTest, StateRequestIsServedAndTheServerSurvives) {
  std::string served(3 * (1 << 20) + 17, '\0');
  for (size_t i = 0; i < served.size(); ++i) served[i] = static_cast<char>(i * 31 + 7);
  groups_[2]->SetStateProvider(ids_[2], [&](int stage, uint64_t iteration)
                                            -> absl::StatusOr<std::string> {
    EXPECT_EQ(stage, 1);
    EXPECT_EQ(iteration, 5u);
    return served;
  });
  for (int round = 0; round < 2; ++round) {
    std::optional<absl::StatusOr<std::string>> got;
    absl::Notification done;
    groups_[1]->FetchState(5, 1, ids_[2], [&](absl::StatusOr<std::string> s) {
      got = std::move(s);
      done.Notify();
    });
    ASSERT_TRUE(done.WaitForNotificationWithTimeout(kPatience));
    ASSERT_TRUE(got->ok()) << got->status();
    EXPECT_EQ(**got, served);
  }
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
  std::vector<std::unique_ptr<StaticSwarmView>> views;
  std::vector<std::unique_ptr<GrpcGroupComm>> groups;
  for (int i = 0; i < 3; ++i) {
    views.push_back(std::make_unique<StaticSwarmView>(members));
    GrpcGroupOptions o;
    o.self = ids[i];
    BePatient(o);
    o.credentials = identity::PeerCredentials::Insecure();
    auto g = GrpcGroupComm::Create(o, views[i].get(), &clock);
    ASSERT_TRUE(g.ok()) << g.status();
    groups.push_back(*std::move(g));
  }
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      views[i]->SetAddresses(ids[j], "", "127.0.0.1:" + std::to_string(groups[j]->port()));
    }
  }
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
  std::vector<PeerInfo> members;
  for (int i = 0; i < 3; ++i) members.push_back({ids[i], {1}, 4, "", ""});
  std::vector<std::unique_ptr<StaticSwarmView>> views;
  std::vector<std::unique_ptr<GrpcGroupComm>> groups;
  for (int i = 0; i < 3; ++i) {
    views.push_back(std::make_unique<StaticSwarmView>(members));
    GrpcGroupOptions o;
    o.self = ids[i];
    BePatient(o);
    o.credentials = identity::PeerCredentials::Insecure();
    auto g = GrpcGroupComm::Create(o, views[i].get(), &clock);
    ASSERT_TRUE(g.ok()) << g.status();
    groups.push_back(*std::move(g));
  }
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      views[i]->SetAddresses(ids[j], "", "127.0.0.1:" + std::to_string(groups[j]->port()));
    }
  }
  SimDriver sim(&clock);
  auto contribution = [&](int i) {
    GradientContribution c;
    c.from = ids[i];
    c.flat = std::vector<float>(9, 1.f + i);
    c.visits = 1;
    c.params_digest = 7;
    c.close_after = absl::Seconds(2);
    return c;
  };
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
  std::vector<PeerInfo> members;
  for (int i = 0; i < 3; ++i) members.push_back({ids[i], {1}, 4, "", ""});
  std::vector<std::unique_ptr<StaticSwarmView>> views;
  std::vector<std::unique_ptr<GrpcGroupComm>> groups;
  for (int i = 0; i < 3; ++i) {
    views.push_back(std::make_unique<StaticSwarmView>(members));
    GrpcGroupOptions o;
    o.self = ids[i];
    BePatient(o);
    o.probe_failures = 1000;  // the held-up link is not a death
    o.retry_pushes_to = [](const NodeId&) { return true; };
    o.push_retries = 1000;
    o.credentials = identity::PeerCredentials::Insecure();
    auto g = GrpcGroupComm::Create(o, views[i].get(), &clock);
    ASSERT_TRUE(g.ok()) << g.status();
    groups.push_back(*std::move(g));
  }
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      views[i]->SetAddresses(ids[j], "", "127.0.0.1:" + std::to_string(groups[j]->port()));
    }
  }
  SimDriver sim(&clock);
  auto contribution = [&](int i) {
    GradientContribution c;
    c.from = ids[i];
    c.flat = std::vector<float>(9, 1.f + i);
    c.visits = 1;
    c.params_digest = 7;
    c.close_after = absl::Seconds(2);
    return c;
  };
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
  std::vector<PeerInfo> members;
  for (int i = 0; i < 2; ++i) members.push_back({ids[i], {1}, 4, "", ""});
  std::vector<std::unique_ptr<StaticSwarmView>> views;
  std::vector<std::unique_ptr<GrpcGroupComm>> groups;
  for (int i = 0; i < 2; ++i) {
    views.push_back(std::make_unique<StaticSwarmView>(members));
    GrpcGroupOptions o;
    o.self = ids[i];
    BePatient(o);
    o.credentials = identity::PeerCredentials::Insecure();
    auto g = GrpcGroupComm::Create(o, views[i].get(), &clock);
    ASSERT_TRUE(g.ok()) << g.status();
    groups.push_back(*std::move(g));
  }
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      views[i]->SetAddresses(ids[j], "", "127.0.0.1:" + std::to_string(groups[j]->port()));
    }
  }
  SimDriver sim(&clock);
  auto contribution = [&](int i) {
    GradientContribution c;
    c.from = ids[i];
    c.flat = std::vector<float>(9, 1.f + i);
    c.visits = 1;
    c.params_digest = 7;
    c.close_after = absl::Seconds(2);
    return c;
  };
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

// Note [Stopping]: waiting for a peer that never answers (a static swarm
// whose other nodes are not up) ends at once when asked to, instead of
// holding a stop signal for the whole startup timeout.
TEST_F(GrpcGroupTest, AwaitPeersEndsAtOnceWhenCancelled) {
  groups_[2].reset();  // never answers
  int polls = 0;
  absl::Status s = groups_[0]->AwaitPeers(absl::Seconds(600), [&polls] { return ++polls > 3; });
  EXPECT_TRUE(absl::IsCancelled(s)) << s;
  EXPECT_LE(polls, 10);
}

}  // namespace
}  // namespace skipswarm::node
