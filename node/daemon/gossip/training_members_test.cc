#include "node/daemon/gossip/training_members.h"

#include <algorithm>
#include <optional>
#include <set>
#include <tuple>

#include "gtest/gtest.h"
#include "node/daemon/gossip/test_members.h"
#include "node/train/data_source.h"
#include "node/train/scheduler_planner.h"

namespace skipswarm::node {
namespace {

using testing::TestMember;
using testing::TestView;

membership::MemberInfo Member(const std::string& name, std::vector<uint32_t> stages,
                              uint64_t entry) {
  membership::MemberInfo m = TestMember(name, std::move(stages));
  m.iteration = entry;
  return m;
}

TEST(TrainingMembersTest, JoinerEntersBothFacesAtItsEntry) {
  const auto d = Member("d", {0}, 0), r = Member("r", {1}, 0), j = Member("j", {1}, 5);
  TrainingMembers members(d.id);
  members.Update(TestView({d, r, j}, 1));
  members.SetIteration(4);
  EXPECT_EQ(members.group()->Replicas(1), std::vector<common::NodeId>{r.id});
  EXPECT_EQ(members.routing()->Replicas(1), std::vector<common::NodeId>{r.id});
  EXPECT_FALSE(members.routing()->IsAlive(j.id));
  // Note [Entry iteration]: at e it averages and gets micro-batches.
  members.SetIteration(5);
  EXPECT_EQ(members.group()->Replicas(1).size(), 2u);
  EXPECT_EQ(members.routing()->Replicas(1).size(), 2u);
  EXPECT_TRUE(members.routing()->IsAlive(j.id));
  // Addresses come from the record (Note [Daemon records]).
  for (const PeerInfo& p : members.routing()->Members()) {
    if (p.id == j.id) {
      EXPECT_EQ(p.address, "j:p");
      EXPECT_EQ(p.group_address, "j:r");
    }
  }
}

// Note [Routed once ready]: a joiner whose record still says entering (its
// state not loaded yet) takes its replicas' steps from its entry but gets
// no micro-batch until it re-signs without the flag. Before, it was routed
// from its entry whatever its state, and when its state came too late for
// that entry the frames routed to it were dropped.
TEST(TrainingMembersTest, AnEnteringJoinerAveragesFromItsEntryButIsRoutedOnlyOnceReady) {
  const auto d = Member("d", {0}, 0), r = Member("r", {1}, 0);
  auto j = Member("j", {1}, 5);
  j.entering = true;
  TrainingMembers members(d.id);
  members.Update(TestView({d, r, j}, 1));
  members.SetIteration(5);
  EXPECT_EQ(members.group()->Replicas(1).size(), 2u);
  EXPECT_EQ(members.routing()->Replicas(1), std::vector<common::NodeId>{r.id});
  for (const PeerInfo& p : members.routing()->Members()) EXPECT_NE(p.id, j.id);
  members.SetIteration(7);
  EXPECT_EQ(members.routing()->Replicas(1), std::vector<common::NodeId>{r.id});
  // Note [Entering members] (node/train/grpc_group.h): the group face says
  // so, and its rounds close without it.
  auto entering_in_group = [&] {
    for (const PeerInfo& p : members.group()->Members()) {
      if (p.id == j.id) return p.entering;
    }
    return false;
  };
  EXPECT_TRUE(entering_in_group());
  j.entering = false;
  j.incarnation = 2;
  members.Update(TestView({d, r, j}, 2));
  EXPECT_EQ(members.routing()->Replicas(1).size(), 2u);
  bool listed = false;
  for (const PeerInfo& p : members.routing()->Members()) listed |= p.id == j.id;
  EXPECT_TRUE(listed);
  EXPECT_FALSE(entering_in_group());
}

// The planner's compute costs come from the records (Note [Planning from
// measured speeds] in node/train/scheduler_planner.cc); 0 = not published.
TEST(TrainingMembersTest, MembersCarryTheirMeasuredComputeSpeed) {
  auto d = Member("d", {0}, 0), r = Member("r", {1}, 0), s = Member("s", {1}, 0);
  r.seconds_per_layer_per_sample = 0.05;
  TrainingMembers members(d.id);
  members.Update(TestView({d, r, s}, 1));
  int seen = 0;
  for (const PeerInfo& p : members.routing()->Members()) {
    if (p.id == r.id) {
      EXPECT_EQ(p.sec_per_layer_sample, 0.05);
      ++seen;
    } else {
      EXPECT_EQ(p.sec_per_layer_sample, 0) << p.id.ShortString();
    }
  }
  EXPECT_EQ(seen, 1);
}

// Note [Gossiped bans] (node/train/gossiped_bans.h): the group face carries
// each member's published bans to GrpcGroupComm.
TEST(TrainingMembersTest, TheGroupFaceCarriesPublishedBans) {
  auto d = Member("d", {0}, 0), r = Member("r", {1}, 0), s = Member("s", {1}, 0);
  r.bans = {s.id};
  TrainingMembers members(d.id);
  members.Update(TestView({d, r, s}, 1));
  int seen = 0;
  for (const PeerInfo& p : members.group()->Members()) {
    EXPECT_EQ(p.bans, p.id == r.id ? std::vector<common::NodeId>{s.id}
                                   : std::vector<common::NodeId>{})
        << p.id.ShortString();
    seen += p.id == r.id;
  }
  EXPECT_EQ(seen, 1);
}

// Note [Sending checks] (node/stage/stage_server_verify_send.cc): whether a
// member answers verify-only frames comes from its record; an older
// build's record lacks it, and it is never sent one.
TEST(TrainingMembersTest, TheRoutingFaceSaysWhoAnswersVerifyFrames) {
  auto d = Member("d", {0}, 0), r = Member("r", {1}, 0), s = Member("s", {1}, 0);
  r.verify_frames = true;
  TrainingMembers members(d.id);
  members.Update(TestView({d, r, s}, 1));
  int seen = 0;
  for (const PeerInfo& p : members.routing()->Members()) {
    EXPECT_EQ(p.verify_frames, p.id == r.id) << p.id.ShortString();
    seen += p.id == r.id || p.id == s.id;
  }
  EXPECT_EQ(seen, 2);
}

// A measured link from -> to.
membership::LinkInfo MeasuredLink(const membership::MemberInfo& from,
                                  const membership::MemberInfo& to, absl::Duration rtt,
                                  double bps) {
  membership::LinkInfo l;
  l.from = from.id;
  l.to = to.id;
  l.rtt = rtt;
  l.bytes_per_second = bps;
  return l;
}

// The view's links in (from, to) order, as a membership view keeps them.
void SortLinks(membership::View* view) {
  std::sort(view->links.begin(), view->links.end(), [](const auto& a, const auto& b) {
    return std::tie(a.from, a.to) < std::tie(b.from, b.to);
  });
}

// Measured links reach the planner (Note [Planning from measured links] in
// node/train/scheduler_planner.cc): SwarmView::Link answers from the
// view's samples, and the data node's planner routes off the slow one.
TEST(TrainingMembersTest, MeasuredLinksReachThePlanner) {
  auto d = Member("d", {0}, 0), r = Member("r", {1}, 0), s = Member("s", {1}, 0);
  membership::View view = TestView({d, r, s}, 1);
  view.links = {MeasuredLink(d, s, absl::Milliseconds(200), 1e6),
                MeasuredLink(d, r, absl::Milliseconds(20), 1e8),
                MeasuredLink(s, d, absl::InfiniteDuration(), 2e6)};
  for (membership::LinkInfo& l : view.links) l.throughput_measured_at = absl::FromUnixSeconds(1000);
  SortLinks(&view);
  TrainingMembers members(d.id);
  members.Update(view);
  std::optional<LinkEstimate> ds = members.routing()->Link(d.id, s.id);
  ASSERT_TRUE(ds.has_value());
  EXPECT_EQ(ds->rtt, absl::Milliseconds(200));
  EXPECT_EQ(ds->bytes_per_second, 1e6);
  // Its age too (Note [Planning from measured links]: old throughputs).
  EXPECT_EQ(ds->throughput_measured_at, absl::FromUnixSeconds(1000));
  std::optional<LinkEstimate> sd = members.group()->Link(s.id, d.id);
  ASSERT_TRUE(sd.has_value());
  EXPECT_EQ(sd->rtt, absl::InfiniteDuration());
  EXPECT_EQ(sd->bytes_per_second, 2e6);
  EXPECT_FALSE(members.routing()->Link(r.id, d.id).has_value());  // r published nothing
  EXPECT_FALSE(members.routing()->Link(d.id, d.id).has_value());

  SchedulerPlannerOptions o;
  o.costs.bytes_per_mb = 1 << 20;  // 1 s over d <-> s, 10 ms over d <-> r
  auto planner = SchedulerPlanner::Create(o);
  ASSERT_TRUE(planner.ok());
  auto routes = (*planner)->Plan({0, d.id, 4, 2}, *members.routing());
  ASSERT_TRUE(routes.ok()) << routes.status();
  ASSERT_EQ(routes->size(), 4u);
  for (const PlannedRoute& route : *routes) EXPECT_EQ(route.hops[1].node, r.id);
  // Without the samples (uniform hops, negligible compute) it sends them
  // all to s.
  view.links.clear();
  view.version = 2;
  members.Update(view);
  auto blind = (*planner)->Plan({0, d.id, 4, 2}, *members.routing());
  ASSERT_TRUE(blind.ok());
  for (const PlannedRoute& route : *blind) EXPECT_EQ(route.hops[1].node, s.id);
}

// A data-node joiner (stage 0) gets its own shard from its entry on: the
// data nodes' ranks come from the routing face (Note [Data order]), so d
// and j read disjoint micro-batches, and nothing another data node reads.
// Note [Relayed verdicts]: a failed hop to a relayed member (its relay
// died) is no local verdict, also after it re-signed with new relays; the
// replica group's verdicts, and verdicts about direct members, still count.
TEST(TrainingMembersTest, AFailedHopToARelayedMemberIsNoDeadVerdict) {
  auto d = Member("d", {0}, 0), r = Member("r", {1}, 0), n = Member("n", {1}, 0),
       q = Member("q", {2}, 0), s = Member("s", {2}, 0);
  n.outbound_only = true;
  n.relays = {q.id, s.id};
  TrainingMembers members(d.id);
  members.Update(TestView({d, r, n, q, s}, 1));
  members.SetIteration(3);
  // Relay q dies: the streams through it break.
  members.routing()->MarkDead(n.id);
  members.routing()->MarkDead(q.id);
  EXPECT_TRUE(members.routing()->IsAlive(n.id));
  EXPECT_TRUE(members.group()->IsAlive(n.id));
  EXPECT_FALSE(members.group()->IsAlive(q.id));  // a direct member: the verdict holds
  // n re-attaches to another relay and re-signs; sends that fail while the
  // transport backs off from the broken stream come after that.
  n.incarnation = 2;
  n.relays = {s.id, r.id};
  members.Update(TestView({d, r, n, q, s}, 2));
  members.routing()->MarkDead(n.id);
  EXPECT_TRUE(members.routing()->IsAlive(n.id));
  EXPECT_TRUE(members.group()->IsAlive(n.id));
  EXPECT_EQ(members.group()->Replicas(1), (std::vector<common::NodeId>{std::min(r.id, n.id),
                                                                        std::max(r.id, n.id)}));
  // The replica group's own verdict (pushes and probes through its relays
  // failed) cuts it out.
  members.group()->MarkDead(n.id);
  EXPECT_FALSE(members.group()->IsAlive(n.id));
  EXPECT_FALSE(members.routing()->IsAlive(n.id));
}

// Note [Relayed links]: a hop to an outbound-only member costs the path
// through its relay; the member's own direction stays direct.
TEST(TrainingMembersTest, ALinkToARelayedMemberCostsThePathThroughItsRelay) {
  auto d = Member("d", {0}, 0), r = Member("r", {1}, 0), n = Member("n", {1}, 0);
  n.outbound_only = true;
  n.relays = {r.id};
  membership::View view = TestView({d, r, n}, 1);
  // n's own pings go out directly (20 ms); d <-> r 10 ms at 100 MB/s,
  // r <-> n 30 ms at 5 MB/s (n's home uplink).
  view.links = {MeasuredLink(n, d, absl::Milliseconds(20), 0),
                MeasuredLink(d, r, absl::Milliseconds(10), 1e8),
                MeasuredLink(n, r, absl::Milliseconds(30), 5e6)};
  SortLinks(&view);
  TrainingMembers members(d.id);
  members.Update(view);
  std::optional<LinkEstimate> dn = members.routing()->Link(d.id, n.id);
  ASSERT_TRUE(dn.has_value());
  EXPECT_EQ(dn->rtt, absl::Milliseconds(40));
  EXPECT_EQ(dn->bytes_per_second, 5e6);
  std::optional<LinkEstimate> nd = members.routing()->Link(n.id, d.id);
  ASSERT_TRUE(nd.has_value());
  EXPECT_EQ(nd->rtt, absl::Milliseconds(20));  // direct
  // The relay's own leg is direct too.
  std::optional<LinkEstimate> rn = members.routing()->Link(r.id, n.id);
  EXPECT_FALSE(rn.has_value());  // nothing measured r -> n, and no relay in between
}

// Note [Own relay first]: a member that is any of the target's relays (not
// only its first) dials it through its own Relay service, so its link is
// direct, not the path through the first relay.
TEST(TrainingMembersTest, ALinkFromAnyOfARelayedMembersRelaysIsDirect) {
  auto d = Member("d", {0}, 0), r = Member("r", {1}, 0), s = Member("s", {2}, 0),
       n = Member("n", {1}, 0);
  n.outbound_only = true;
  n.relays = {r.id, s.id};
  membership::View view = TestView({d, r, s, n}, 1);
  view.links = {MeasuredLink(s, r, absl::Milliseconds(10), 1e8),
                MeasuredLink(n, r, absl::Milliseconds(30), 5e6)};
  SortLinks(&view);
  TrainingMembers members(d.id);
  members.Update(view);
  // Not s -> r -> n (40 ms): nothing measured s -> n itself.
  EXPECT_FALSE(members.routing()->Link(s.id, n.id).has_value());
}

TEST(TrainingMembersTest, DataNodeJoinerGetsItsOwnShardFromItsEntry) {
  const auto d = Member("d", {0}, 0), r = Member("r", {1}, 0), j = Member("j", {0}, 5);
  auto ranks = [&](uint64_t iteration) {
    TrainingMembers members(d.id);
    members.Update(TestView({d, r, j}, 1));
    members.SetIteration(iteration);
    std::vector<common::NodeId> data;
    for (const PeerInfo& p : members.routing()->Members()) {
      if (std::find(p.stages.begin(), p.stages.end(), 0) != p.stages.end()) data.push_back(p.id);
    }
    return data;
  };
  EXPECT_EQ(ranks(4), std::vector<common::NodeId>{d.id});
  const std::vector<common::NodeId> data = ranks(5);
  ASSERT_EQ(data.size(), 2u);
  constexpr int kMbs = 4;
  std::set<uint64_t> seen;
  for (int rank = 0; rank < 2; ++rank) {
    for (int mb = 0; mb < kMbs; ++mb) {
      EXPECT_TRUE(seen.insert(GlobalMicroBatchIndex(5, rank, 2, kMbs, mb)).second);
    }
  }
  // Nothing read in iteration 4 (d alone) is read again in 5.
  for (int mb = 0; mb < kMbs; ++mb) EXPECT_EQ(seen.count(GlobalMicroBatchIndex(4, 0, 1, kMbs, mb)), 0u);
}

// Note [Stage moves].
TEST(TrainingMembersTest, MoverKeepsItsOldStageUntilItsSwitchAndIsRoutedOneLater) {
  const auto d = Member("d", {0}, 0), a = Member("a", {1}, 0), c = Member("c", {2}, 0);
  auto m = Member("m", {1}, 0);
  TrainingMembers members(d.id);
  members.Update(TestView({d, a, c, m}, 1));
  auto moved = m;
  moved.stages = {2};
  moved.iteration = 7;
  moved.incarnation = 2;
  members.Update(TestView({d, a, c, moved}, 2));
  members.SetIteration(6);
  EXPECT_EQ(members.group()->Replicas(1).size(), 2u);
  EXPECT_EQ(members.routing()->Replicas(1).size(), 2u);
  EXPECT_EQ(members.group()->Replicas(2), std::vector<common::NodeId>{c.id});
  members.SetIteration(7);
  EXPECT_EQ(members.group()->Replicas(1), std::vector<common::NodeId>{a.id});
  EXPECT_EQ(members.routing()->Replicas(1), std::vector<common::NodeId>{a.id});
  EXPECT_EQ(members.group()->Replicas(2).size(), 2u);
  EXPECT_EQ(members.routing()->Replicas(2), std::vector<common::NodeId>{c.id});
  members.SetIteration(8);
  EXPECT_EQ(members.routing()->Replicas(2).size(), 2u);
  // Its PeerInfo names the stage it has in each iteration.
  for (const PeerInfo& p : members.group()->Members()) {
    if (p.id == m.id) {
      EXPECT_EQ(p.stages, std::vector<int>{2});
    }
  }
  // A node that only ever saw the new record lists it from the switch.
  TrainingMembers late(c.id);
  late.Update(TestView({d, a, c, moved}, 2));
  late.SetIteration(6);
  EXPECT_EQ(late.group()->Replicas(1), std::vector<common::NodeId>{a.id});
  EXPECT_FALSE(late.group()->IsAlive(m.id));
}

// Notes [Stage moves] and [Routed once ready]: a mover's record says
// `entering` from its announcement until its new stage's state is loaded.
// The flag speaks of the new stage: up to its switch it is routed in its
// old one as before; from the switch it averages the new one but gets no
// micro-batch of it until its ready record comes, however late. Before,
// a move set no flag and the mover was routed in its new stage from the
// switch + 1 whether or not its state was there.
TEST(TrainingMembersTest, AnEnteringMoverIsRoutedInItsNewStageOnlyOnceReady) {
  const auto d = Member("d", {0}, 0), a = Member("a", {1}, 0), c = Member("c", {2}, 0);
  auto m = Member("m", {1}, 0);
  TrainingMembers members(d.id);
  members.SetIteration(5);
  members.Update(TestView({d, a, c, m}, 1));
  auto moving = m;
  moving.stages = {2};
  moving.iteration = 7;
  moving.incarnation = 2;
  moving.entering = true;
  members.Update(TestView({d, a, c, moving}, 2));
  members.SetIteration(6);
  EXPECT_EQ(members.routing()->Replicas(1).size(), 2u);  // its old stage, to the switch
  EXPECT_EQ(members.routing()->Replicas(2), std::vector<common::NodeId>{c.id});
  bool listed = false;
  for (const PeerInfo& p : members.routing()->Members()) {
    if (p.id == m.id) {
      listed = true;
      EXPECT_EQ(p.stages, std::vector<int>{1});
    }
  }
  EXPECT_TRUE(listed);
  for (uint64_t it : {7, 8, 9}) {
    members.SetIteration(it);
    EXPECT_EQ(members.group()->Replicas(2).size(), 2u) << it;
    EXPECT_EQ(members.routing()->Replicas(2), std::vector<common::NodeId>{c.id}) << it;
    EXPECT_EQ(members.routing()->Replicas(1), std::vector<common::NodeId>{a.id}) << it;
    for (const PeerInfo& p : members.routing()->Members()) EXPECT_NE(p.id, m.id) << it;
  }
  auto ready = moving;
  ready.entering = false;
  ready.incarnation = 3;
  members.Update(TestView({d, a, c, ready}, 3));
  EXPECT_EQ(members.routing()->Replicas(2).size(), 2u);
  EXPECT_EQ(members.routing()->Replicas(1), std::vector<common::NodeId>{a.id});
  // A node that only ever saw the entering record: nothing before the
  // switch, and no route to it before its ready record either.
  TrainingMembers late(a.id);
  late.Update(TestView({d, a, c, moving}, 2));
  late.SetIteration(8);
  EXPECT_EQ(late.group()->Replicas(2).size(), 2u);
  EXPECT_EQ(late.routing()->Replicas(2), std::vector<common::NodeId>{c.id});
  late.Update(TestView({d, a, c, ready}, 3));
  EXPECT_EQ(late.routing()->Replicas(2).size(), 2u);
}

TEST(TrainingMembersTest, PreparingMemberWithoutStagesIsNotInTraining) {
  const auto d = Member("d", {0}, 0), p = Member("p", {}, 0);
  TrainingMembers members(d.id);
  members.Update(TestView({d, p}, 1));
  EXPECT_EQ(members.group()->Members().size(), 1u);
  EXPECT_FALSE(members.group()->IsAlive(p.id));
}

TEST(TrainingMembersTest, DeadOrLeftMemberDropsOutAtOnceButStaysListed) {
  auto d = Member("d", {0}, 0), r = Member("r", {1}, 0), q = Member("q", {1}, 0);
  TrainingMembers members(d.id);
  members.SetIteration(3);
  members.Update(TestView({d, r, q}, 1));
  EXPECT_EQ(members.group()->Replicas(1).size(), 2u);
  r.state = proto::MEMBER_STATE_DEAD;
  q.iteration = 2;  // left after iteration 2
  q.state = proto::MEMBER_STATE_LEFT;
  const uint64_t before = members.group()->version();
  members.Update(TestView({d, r, q}, 2));
  EXPECT_GT(members.group()->version(), before);
  EXPECT_TRUE(members.group()->Replicas(1).empty());
  // Listed still (stable data order), just not alive.
  EXPECT_EQ(members.group()->Members().size(), 3u);
  // An older snapshot arriving late does not revive them.
  r.state = proto::MEMBER_STATE_ALIVE;
  members.Update(TestView({d, r}, 1));
  EXPECT_FALSE(members.group()->IsAlive(r.id));
}

TEST(TrainingMembersTest, LeaverFinishesItsExitIterationInTheGroupButGetsNoNewWork) {
  auto d = Member("d", {0}, 0), r = Member("r", {1}, 0), q = Member("q", {1}, 0);
  TrainingMembers members(d.id);
  members.SetIteration(7);
  q.state = proto::MEMBER_STATE_LEFT;
  q.iteration = 7;  // signed LEFT with exit iteration 7
  members.Update(TestView({d, r, q}, 1));
  EXPECT_EQ(members.group()->Replicas(1).size(), 2u);
  EXPECT_EQ(members.routing()->Replicas(1), std::vector<common::NodeId>{r.id});
  // Micro-batches already routed through it still reach it; no new ones.
  EXPECT_TRUE(members.routing()->IsAlive(q.id));
  EXPECT_EQ(members.routing()->Members().size(), 2u);
  // A failed hop does not cut it out of its last iteration...
  members.routing()->MarkDead(q.id);
  EXPECT_EQ(members.group()->Replicas(1).size(), 2u);
  // ...but the group's own verdict (it exited and does not answer) does.
  members.group()->MarkDead(q.id);
  EXPECT_EQ(members.group()->Replicas(1), std::vector<common::NodeId>{r.id});
  members.SetIteration(8);
  EXPECT_EQ(members.group()->Replicas(1), std::vector<common::NodeId>{r.id});
  EXPECT_EQ(members.group()->Members().size(), 3u);  // still listed (data order)
}

// Note [Confirmed stopping] (node/train/data_node_driver.h): q, a replica
// that stops where r stays, signs LEFT with its exit iteration 7, not
// record.stopping; its server refuses iteration 8 all the same. A refusal
// of its that a relay passes on to the data node is confirmed by that
// signed LEFT record, so the data node re-runs the micro-batch. Before,
// only record.stopping confirmed: the data node held the claim to the
// micro-batch's deadline and dropped it as "stopping_unconfirmed" (seen in
// restart_behind_test: one micro-batch of the iteration after a stage-2
// replica's stop, relayed by stage 1). Once q is back (ALIVE, a later
// incarnation) or only DEAD, nothing it signed says it stops, and its
// record's incarnation (SwarmView::Incarnation) is the later one.
TEST(TrainingMembersTest, ALeaversSignedExitIterationConfirmsItsStop) {
  auto d = Member("d", {0}, 0), r = Member("r", {1}, 0), q = Member("q", {1}, 0);
  TrainingMembers members(d.id);
  members.SetIteration(8);
  members.Update(TestView({d, r, q}, 1));
  EXPECT_EQ(members.routing()->StopAfter(q.id), std::nullopt);
  q.state = proto::MEMBER_STATE_LEFT;
  q.iteration = 7;
  q.incarnation = 2;
  members.Update(TestView({d, r, q}, 2));
  EXPECT_EQ(members.routing()->StopAfter(q.id), std::optional<uint64_t>(7));
  EXPECT_EQ(members.group()->StopAfter(q.id), std::optional<uint64_t>(7));
  EXPECT_EQ(members.routing()->StopAfter(r.id), std::nullopt);
  auto back = q;
  back.state = proto::MEMBER_STATE_ALIVE;
  back.iteration = 20;
  back.incarnation = 3;
  members.Update(TestView({d, r, back}, 3));
  EXPECT_EQ(members.routing()->StopAfter(q.id), std::nullopt);
  // What a data node ties its stopping mark of q to, in both faces.
  EXPECT_EQ(members.routing()->Incarnation(q.id), std::optional<uint64_t>(3));
  EXPECT_EQ(members.group()->Incarnation(q.id), std::optional<uint64_t>(3));
  EXPECT_EQ(members.routing()->Incarnation(common::NodeId::ForName("stranger")), std::nullopt);
  r.state = proto::MEMBER_STATE_DEAD;
  members.Update(TestView({d, r, back}, 4));
  EXPECT_EQ(members.routing()->StopAfter(r.id), std::nullopt);
}

// Note [Paused members]: routed around from the next plan on, alive for
// the hops already routed through it, still averaging; routed again once
// it resumes.
TEST(TrainingMembersTest, PausedMemberGetsNoNewRoutesButStaysAliveAndAveraging) {
  auto d = Member("d", {0}, 0), r = Member("r", {1}, 0), q = Member("q", {1}, 0);
  TrainingMembers members(d.id);
  members.SetIteration(4);
  members.Update(TestView({d, r, q}, 1));
  EXPECT_EQ(members.routing()->Replicas(1).size(), 2u);
  q.paused = true;
  q.incarnation = 2;
  const uint64_t before = members.routing()->version();
  members.Update(TestView({d, r, q}, 2));
  EXPECT_GT(members.routing()->version(), before);  // the next plan sees it
  EXPECT_EQ(members.routing()->Replicas(1), std::vector<common::NodeId>{r.id});
  EXPECT_EQ(members.routing()->Members().size(), 2u);
  EXPECT_TRUE(members.routing()->IsAlive(q.id));  // in-flight hops still reach it
  EXPECT_EQ(members.group()->Replicas(1).size(), 2u);
  // Many iterations later (no entry, no exit: a pause has no end date).
  members.SetIteration(400);
  EXPECT_EQ(members.routing()->Replicas(1), std::vector<common::NodeId>{r.id});
  EXPECT_EQ(members.group()->Replicas(1).size(), 2u);
  SchedulerPlannerOptions o;
  auto planner = SchedulerPlanner::Create(o);
  ASSERT_TRUE(planner.ok());
  auto routes = (*planner)->Plan({400, d.id, 6, 2}, *members.routing());
  ASSERT_TRUE(routes.ok()) << routes.status();
  for (const PlannedRoute& route : *routes) EXPECT_EQ(route.hops[1].node, r.id);
  q.paused = false;
  q.incarnation = 3;
  members.Update(TestView({d, r, q}, 3));
  EXPECT_EQ(members.routing()->Replicas(1).size(), 2u);
  auto resumed = (*planner)->Plan({401, d.id, 6, 2}, *members.routing());
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  int to_q = 0;
  for (const PlannedRoute& route : *resumed) to_q += route.hops[1].node == q.id;
  EXPECT_GT(to_q, 0);
}

// Note [Stopping last replica]: q, stage 1's last replica, stops after
// iteration 5 (record.stopping, stop_after 5; not LEFT yet). It is routed
// in 5 and in no plan after it: the planner cannot plan 6 (the data node
// pauses there) instead of routing it through q, whose update for 6 is
// never applied. Before, q stayed in every plan until its LEFT arrived.
TEST(TrainingMembersTest, AStoppingLastReplicaIsInNoPlanAfterItsLastIteration) {
  auto d = Member("d", {0}, 0), q = Member("q", {1}, 0);
  q.stopping = true;
  q.stop_after = 5;
  q.incarnation = 2;
  TrainingMembers members(d.id);
  members.SetIteration(5);
  members.Update(TestView({d, q}, 1));
  EXPECT_EQ(members.routing()->Replicas(1), std::vector<common::NodeId>{q.id});
  SchedulerPlannerOptions o;
  auto planner = SchedulerPlanner::Create(o);
  ASSERT_TRUE(planner.ok());
  ASSERT_TRUE((*planner)->Plan({5, d.id, 2, 2}, *members.routing()).ok());
  members.SetIteration(6);
  EXPECT_TRUE(members.routing()->Replicas(1).empty());
  EXPECT_FALSE((*planner)->Plan({6, d.id, 2, 2}, *members.routing()).ok())
      << "iteration 6 was planned through a replica that stopped after 5";
  EXPECT_TRUE(members.routing()->IsAlive(q.id));  // hops of 5 still reach it
  EXPECT_EQ(members.group()->Replicas(1).size(), 1u);  // unchanged until its LEFT
  // Note [Confirmed stopping] (node/train/data_node_driver.h): what a data
  // node checks a relayed stopping claim against, in both faces.
  EXPECT_EQ(members.routing()->StopAfter(q.id), std::optional<uint64_t>(5));
  EXPECT_EQ(members.group()->StopAfter(q.id), std::optional<uint64_t>(5));
  EXPECT_EQ(members.routing()->StopAfter(d.id), std::nullopt);
}

// Notes [Paused members] and [Stage moves]: a mover that pauses after it
// announced its move (records: the move, then the move and the pause)
// still averages its old stage up to its switch and its new one from
// there, is routed in neither while paused, and once resumed is routed in
// its new stage only.
TEST(TrainingMembersTest, MoverPausedBeforeItsSwitchAveragesBothStagesAndIsRoutedAfterResume) {
  const auto d = Member("d", {0}, 0), a = Member("a", {1}, 0), c = Member("c", {2}, 0);
  auto m = Member("m", {1}, 0);
  TrainingMembers members(d.id);
  members.SetIteration(5);
  members.Update(TestView({d, a, c, m}, 1));
  auto moving = m;
  moving.stages = {2};
  moving.iteration = 7;
  moving.incarnation = 2;
  members.Update(TestView({d, a, c, moving}, 2));
  auto paused = moving;
  paused.paused = true;
  paused.incarnation = 3;
  members.Update(TestView({d, a, c, paused}, 3));
  members.SetIteration(6);
  EXPECT_EQ(members.group()->Replicas(1).size(), 2u);  // its old stage to the switch
  EXPECT_EQ(members.routing()->Replicas(1), std::vector<common::NodeId>{a.id});
  EXPECT_TRUE(members.routing()->IsAlive(m.id));  // hops already routed through it
  members.SetIteration(7);
  EXPECT_EQ(members.group()->Replicas(1), std::vector<common::NodeId>{a.id});
  EXPECT_EQ(members.group()->Replicas(2).size(), 2u);  // averages stage 2 from its switch
  for (uint64_t it : {7, 8, 30}) {
    members.SetIteration(it);
    EXPECT_EQ(members.routing()->Replicas(2), std::vector<common::NodeId>{c.id}) << it;
    EXPECT_EQ(members.group()->Replicas(2).size(), 2u) << it;
  }
  auto resumed = paused;
  resumed.paused = false;
  resumed.incarnation = 4;
  members.Update(TestView({d, a, c, resumed}, 4));
  EXPECT_EQ(members.routing()->Replicas(2).size(), 2u);
  EXPECT_EQ(members.routing()->Replicas(1), std::vector<common::NodeId>{a.id});
  // Paused first, then the move (record order reversed): the same.
  TrainingMembers other(c.id);
  other.SetIteration(5);
  other.Update(TestView({d, a, c, m}, 1));
  auto paused_first = m;
  paused_first.paused = true;
  paused_first.incarnation = 2;
  other.Update(TestView({d, a, c, paused_first}, 2));
  auto then_moving = paused_first;
  then_moving.stages = {2};
  then_moving.iteration = 7;
  then_moving.incarnation = 3;
  other.Update(TestView({d, a, c, then_moving}, 3));
  other.SetIteration(6);
  EXPECT_EQ(other.group()->Replicas(1).size(), 2u);
  EXPECT_EQ(other.routing()->Replicas(1), std::vector<common::NodeId>{a.id});
  other.SetIteration(8);
  EXPECT_EQ(other.group()->Replicas(2).size(), 2u);
  EXPECT_EQ(other.routing()->Replicas(2), std::vector<common::NodeId>{c.id});
}

TEST(TrainingMembersTest, LocalVerdictHoldsUntilTheMemberReSigns) {
  auto d = Member("d", {0}, 0), r = Member("r", {1}, 0);
  TrainingMembers members(d.id);
  members.Update(TestView({d, r}, 1));
  members.routing()->MarkDead(r.id);
  EXPECT_FALSE(members.group()->IsAlive(r.id));
  EXPECT_TRUE(members.group()->IsAlive(d.id));
  r.incarnation = 2;  // it refuted / re-signed
  members.Update(TestView({d, r}, 2));
  EXPECT_TRUE(members.group()->IsAlive(r.id));
}

// Note [Data node behind]: a data node starved of CPU called stage 1's
// replicas dead (its own hops failed) and stayed paused; re-entering, it
// forgets those verdicts. Gossip's verdicts still count.
TEST(TrainingMembersTest, ForgottenLocalVerdictsLeaveGossipsStanding) {
  auto d = Member("d", {0}, 0), r = Member("r", {1}, 0), q = Member("q", {1}, 0);
  q.state = proto::MEMBER_STATE_DEAD;
  TrainingMembers members(d.id);
  members.Update(TestView({d, r, q}, 1));
  members.routing()->MarkDead(r.id);
  members.group()->MarkDead(r.id);
  EXPECT_TRUE(members.routing()->Replicas(1).empty());
  const uint64_t before = members.routing()->version();
  members.ForgetLocalVerdicts();
  EXPECT_GT(members.routing()->version(), before);  // planners see the change
  EXPECT_EQ(members.routing()->Replicas(1), std::vector<common::NodeId>{r.id});
  EXPECT_TRUE(members.group()->IsAlive(r.id));
  EXPECT_FALSE(members.group()->IsAlive(q.id));
}

TEST(TrainingMembersTest, NewAddressesReachTheListener) {
  const auto d = Member("d", {0}, 0), r = Member("r", {1}, 0);
  TrainingMembers members(d.id);
  std::vector<std::string> dialed;
  members.SetAddressListener([&](const PeerInfo& p) { dialed.push_back(p.address); });
  members.Update(TestView({d, r}, 1));
  members.Update(TestView({d, r}, 2));
  EXPECT_EQ(dialed, std::vector<std::string>{"r:p"});
}

TEST(TrainingMembersTest, OtherLiveReplicasCountsOnlyLiveTrainingHosts) {
  auto a = Member("a", {1}, 0), b = Member("b", {1}, 0), c = Member("c", {1}, 9);
  b.state = proto::MEMBER_STATE_DEAD;
  const membership::View v = TestView({a, b, c}, 1);
  EXPECT_TRUE(OtherLiveReplicas(v, a.id, 1, 3).empty());  // c enters at 9
  EXPECT_EQ(OtherLiveReplicas(v, a.id, 1, 9), std::vector<common::NodeId>{c.id});
}

}  // namespace
}  // namespace skipswarm::node

namespace skipswarm::node {
namespace {

// Note [Newcomer probation]: with probation on, a newcomer hosts a stage in
// the routing face only beside a trusted replica, so no plan routes a
// micro-batch through it as the stage's only replica; its replica groups
// take it at once (its digests are compared there), and a vouch by a
// trusted replica makes it a full host.
TEST(TrainingMembersTest, NewcomerOnProbationIsNeverAStagesOnlyRoutedReplica) {
  auto f = Member("f", {0}, 0), t = Member("t", {1}, 0), n = Member("n", {2}, 0),
       m = Member("m", {1}, 0);
  TrainingMembers members(f.id);
  members.SetIteration(4);
  members.Update(TestView({f, t, n, m}, 1));
  members.SetProbation({f.id});
  EXPECT_FALSE(members.Trusted(n.id));
  // Stage 2's only host is new: no routing replica, no route.
  EXPECT_TRUE(members.routing()->Replicas(2).empty());
  EXPECT_EQ(members.group()->Replicas(2), std::vector<common::NodeId>{n.id});
  for (const PeerInfo& p : members.routing()->Members()) EXPECT_NE(p.id, n.id);
  auto planner = SchedulerPlanner::Create(SchedulerPlannerOptions{});
  ASSERT_TRUE(planner.ok());
  // Stage 1's newcomer m stays routable: trusted t (vouched below) ... not
  // yet: t itself is on probation, so stage 1 has no trusted host either.
  EXPECT_TRUE(members.routing()->Replicas(1).empty());
  auto none = (*planner)->Plan({4, f.id, 6, 3}, *members.routing());
  EXPECT_TRUE(!none.ok() || none->empty()) << "a plan relies on newcomers alone";

  // The founder's record vouches for t: stage 1 now has a trusted host, and
  // newcomer m may serve beside it; stage 2 still has none.
  f.vouches = {t.id};
  f.incarnation = 2;
  members.Update(TestView({f, t, n, m}, 2));
  EXPECT_TRUE(members.Trusted(t.id));
  EXPECT_EQ(members.routing()->Replicas(1).size(), 2u);
  EXPECT_TRUE(members.routing()->Replicas(2).empty());
  // When t dies, m would be stage 1's only routed replica: it is none.
  members.routing()->MarkDead(t.id);
  EXPECT_TRUE(members.routing()->Replicas(1).empty());
  // The trusted t (its new life) vouches for n: n now carries stage 2 alone.
  t.vouches = {n.id};
  t.incarnation = 3;
  members.Update(TestView({f, t, n, m}, 3));
  EXPECT_EQ(members.routing()->Replicas(2), std::vector<common::NodeId>{n.id});
  auto routes = (*planner)->Plan({5, f.id, 6, 3}, *members.routing());
  ASSERT_TRUE(routes.ok()) << routes.status();
  ASSERT_FALSE(routes->empty());
  for (const PlannedRoute& route : *routes) {
    ASSERT_EQ(route.hops.size(), 3u);
    EXPECT_EQ(route.hops[2].node, n.id);
  }
}

// Note [Newcomer weight], [Peer quotas]: the group face marks a member on
// probation (its shard owners weigh its parts) until a vouch, and the
// daemon's quotas learn who is untrusted.
TEST(TrainingMembersTest, TheGroupFaceMarksMembersOnProbationUntilVouchedFor) {
  auto f = Member("f", {0}, 0), t = Member("t", {1}, 0), n = Member("n", {1}, 0);
  TrainingMembers members(f.id);
  members.SetIteration(4);
  f.vouches = {t.id};
  members.Update(TestView({f, t, n}, 1));
  members.SetProbation({f.id});
  auto marked = [&] {
    std::vector<common::NodeId> out;
    for (const PeerInfo& p : members.group()->Members()) {
      if (p.on_probation) out.push_back(p.id);
    }
    return out;
  };
  EXPECT_EQ(marked(), std::vector<common::NodeId>{n.id});
  EXPECT_EQ(members.Untrusted(), std::vector<common::NodeId>{n.id});
  t.vouches = {n.id};
  t.incarnation = 2;
  members.Update(TestView({f, t, n}, 2));
  EXPECT_TRUE(marked().empty());
  EXPECT_TRUE(members.Untrusted().empty());
}

// Note [Vouch withdrawal]: when the only voucher's record drops its vouch
// (its output checks caught the member), the member is on probation again
// at once: marked, untrusted, and no longer a stage's only routed replica;
// a second voucher keeps it trusted.
TEST(TrainingMembersTest, AWithdrawnVouchPutsTheMemberBackOnProbation) {
  auto f = Member("f", {0}, 0), t = Member("t", {1}, 0), n = Member("n", {2}, 0),
       u = Member("u", {2}, 0);
  TrainingMembers members(f.id);
  members.SetIteration(4);
  f.vouches = {t.id};
  t.vouches = {n.id};
  members.Update(TestView({f, t, n}, 1));
  members.SetProbation({f.id});
  ASSERT_TRUE(members.Trusted(n.id));
  EXPECT_EQ(members.routing()->Replicas(2), std::vector<common::NodeId>{n.id});
  t.vouches = {};
  t.incarnation = 2;
  members.Update(TestView({f, t, n}, 2));
  EXPECT_FALSE(members.Trusted(n.id));
  EXPECT_EQ(members.Untrusted(), std::vector<common::NodeId>{n.id});
  EXPECT_TRUE(members.routing()->Replicas(2).empty());  // no trusted host of stage 2 beside it
  // Vouched for by a second trusted member (u, itself vouched for by t):
  // t's withdrawal alone leaves it trusted.
  t.vouches = {u.id};
  t.incarnation = 3;
  u.vouches = {n.id};
  members.Update(TestView({f, t, n, u}, 3));
  EXPECT_TRUE(members.Trusted(n.id));
}

// Without probation (every swarm that does not ask for it) nothing changes.
TEST(TrainingMembersTest, WithoutProbationANewcomerIsAFullHost) {
  auto f = Member("f", {0}, 0), n = Member("n", {1}, 0);
  TrainingMembers members(f.id);
  members.SetIteration(4);
  members.Update(TestView({f, n}, 1));
  EXPECT_TRUE(members.Trusted(n.id));
  EXPECT_EQ(members.routing()->Replicas(1), std::vector<common::NodeId>{n.id});
  EXPECT_TRUE(members.Untrusted().empty());
  for (const PeerInfo& p : members.group()->Members()) EXPECT_FALSE(p.on_probation);
}

// Note [Checkable evidence]: the per-frame key look-ups follow the views
// Update accepts, and ignore one that arrives late.
TEST(TrainingMembersTest, FrameKeysFollowTheAcceptedView) {
  auto d = Member("d", {0}, 0), r = Member("r", {1}, 0);
  d.public_key = std::string(32, 'd');
  r.public_key = std::string(32, 'r');
  r.sign_frames = true;
  TrainingMembers members(d.id);
  EXPECT_EQ(members.PublicKeyOf(r.id), std::nullopt);
  EXPECT_FALSE(members.SignsFrames(r.id));
  members.Update(TestView({d, r}, 2));
  EXPECT_EQ(members.PublicKeyOf(r.id), std::string(32, 'r'));
  EXPECT_TRUE(members.SignsFrames(r.id));
  EXPECT_FALSE(members.SignsFrames(d.id));
  auto r2 = r;
  r2.sign_frames = false;  // an older view, out of order: ignored
  members.Update(TestView({d, r2}, 1));
  EXPECT_TRUE(members.SignsFrames(r.id));
  members.Update(TestView({d}, 3));  // r gone from the view
  EXPECT_EQ(members.PublicKeyOf(r.id), std::nullopt);
  EXPECT_FALSE(members.SignsFrames(r.id));
  EXPECT_EQ(members.PublicKeyOf(d.id), std::string(32, 'd'));
}

// Note [Data node entered later]: a relay waiting in an iteration before a
// live data node's entry passes it; a founder, a data node already in, a
// relay entering later or a data node that left say nothing of it.
TEST(TrainingMembersTest, ADataNodeEntersAfterAnIterationOnlyByItsLiveRecordsEntry) {
  auto d = Member("d", {0}, 19);
  const auto r = Member("r", {1}, 0), late_relay = Member("q", {2}, 30);
  EXPECT_TRUE(DataNodeEntersAfter(TestView({d, r}, 1), 18));
  EXPECT_FALSE(DataNodeEntersAfter(TestView({d, r}, 1), 19));
  EXPECT_FALSE(DataNodeEntersAfter(TestView({r, late_relay}, 1), 18));
  EXPECT_FALSE(DataNodeEntersAfter(TestView({Member("f", {0}, 0), r}, 1), 18));
  d.state = proto::MEMBER_STATE_LEFT;
  EXPECT_FALSE(DataNodeEntersAfter(TestView({d, r}, 1), 18));
  d.state = proto::MEMBER_STATE_DEAD;
  EXPECT_FALSE(DataNodeEntersAfter(TestView({d, r}, 1), 18));
}

}  // namespace
}  // namespace skipswarm::node
