// Note [Entry in the group] (grpc_group_push.cc): a member that re-enters
// at an entry far past the iteration it was stuck in admits its replicas'
// pushes for the entry before its own trainer gets there. Note [Entering
// members] (grpc_group.h): a member still loading its state at its entry
// holds no round.
#include <memory>
#include <optional>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/sim_clock.h"
#include "gtest/gtest.h"
#include "node/train/grpc_group.h"
#include "node/train/grpc_group_test_util.h"

namespace skipswarm::node {
namespace {

using common::NodeId;
using grpc_group_testing::LoopbackGroups;
using grpc_group_testing::SimDriver;
using grpc_group_testing::StartLoopbackGroups;

GradientContribution Part(const NodeId& from, int i) {
  GradientContribution c;
  c.from = from;
  c.flat = std::vector<float>(9, 1.f + i);
  c.visits = 1;
  c.params_digest = 7;
  return c;
}

// l0 and l1 replicate stage 1 and average iteration 4 together; l1 then
// stalls while l0 goes on, and re-enters at 10 (its state fetched, as the
// daemon's TryEntry does). l0 gets to 10 first and pushes its parts to l1,
// whose group still stood at 4: refused as 6 ahead, l0 marked l1 dead and
// averaged alone, and l1 had to re-enter again. Entered at 10, l1 holds
// them until its own AllReduce, and both average 10 together.
TEST(GrpcGroupEntryTest, AReenteringMemberAdmitsItsEntrysPushes) {
  common::SimClock clock;
  const std::vector<NodeId> ids = {NodeId::ForName("l0"), NodeId::ForName("l1")};
  std::vector<PeerInfo> members;
  for (const NodeId& id : ids) members.push_back({id, {1}, 4, "", ""});
  absl::StatusOr<LoopbackGroups> swarm = StartLoopbackGroups(members, &clock);
  ASSERT_TRUE(swarm.ok()) << swarm.status();
  std::vector<std::unique_ptr<GrpcGroupComm>>& groups = swarm->groups;
  SimDriver sim(&clock);
  auto round = [&](uint64_t iteration, int i, std::optional<absl::StatusOr<ReduceResult>>* out,
                   absl::Notification* done) {
    groups[i]->AllReduce(iteration, 1, Part(ids[i], i),
                         [out, done](absl::StatusOr<ReduceResult> r) {
                           *out = std::move(r);
                           done->Notify();
                         });
  };
  std::optional<absl::StatusOr<ReduceResult>> a0, a1, b0, b1;
  absl::Notification da0, da1, db0, db1;
  round(4, 0, &a0, &da0);
  round(4, 1, &a1, &da1);
  ASSERT_TRUE(sim.Until(da0) && sim.Until(da1));
  ASSERT_TRUE(a1->ok()) << a1->status();
  ASSERT_EQ((*a1)->contributors, 2);

  groups[1]->EnterAt(10);
  round(10, 0, &b0, &db0);
  // l0's parts of round 10 reach l1 (held, or refused) before l1 starts it.
  ASSERT_TRUE(sim.Until([&] {
    return groups[1]->early_bytes() > 0 || groups[1]->pushes_refused() > 0;
  }));
  EXPECT_EQ(groups[1]->pushes_refused(), 0u) << "l1 refused its entry's pushes";
  round(10, 1, &b1, &db1);
  ASSERT_TRUE(sim.Until(db0) && sim.Until(db1));
  ASSERT_TRUE(b0->ok()) << b0->status();
  ASSERT_TRUE(b1->ok()) << b1->status();
  EXPECT_TRUE(swarm->views[0]->IsAlive(ids[1])) << "l0 dropped the re-entered l1";
  EXPECT_EQ((*b0)->contributors, 2) << "l0 averaged its entry without l1";
  EXPECT_EQ((*b1)->contributors, 2);
  EXPECT_EQ((*b0)->sum, std::vector<float>(9, 3.f));
  EXPECT_EQ((*b1)->sum, (*b0)->sum);
}

// l0 and l1 replicate stage 1; j announced entry 4 and is still fetching
// its state (entering). l0 and l1 average 4 without waiting for j past
// the 1 s grace, long before any silent deadline could end their round. Once loaded, j's own round of 4 (zeros, no visits) takes
// their average as its result, the same step.
TEST(GrpcGroupEntryTest, AMemberStillLoadingItsStateHoldsNoRound) {
  common::SimClock clock;
  const std::vector<NodeId> ids = {NodeId::ForName("l0"), NodeId::ForName("l1"),
                                   NodeId::ForName("j")};
  std::vector<PeerInfo> members;
  for (const NodeId& id : ids) members.push_back({id, {1}, 4, "", ""});
  members[2].entering = true;
  absl::StatusOr<LoopbackGroups> swarm = StartLoopbackGroups(members, &clock);
  ASSERT_TRUE(swarm.ok()) << swarm.status();
  std::vector<std::unique_ptr<GrpcGroupComm>>& groups = swarm->groups;
  groups[2]->EnterAt(4);  // as the daemon's TryEntry, before its fetch
  SimDriver sim(&clock);
  std::optional<absl::StatusOr<ReduceResult>> r0, r1, rj;
  absl::Notification d0, d1, dj;
  auto keep = [](std::optional<absl::StatusOr<ReduceResult>>* out, absl::Notification* done) {
    return [out, done](absl::StatusOr<ReduceResult> r) {
      *out = std::move(r);
      done->Notify();
    };
  };
  const absl::Duration start = clock.SteadyNow();
  groups[0]->AllReduce(4, 1, Part(ids[0], 0), keep(&r0, &d0));
  groups[1]->AllReduce(4, 1, Part(ids[1], 1), keep(&r1, &d1));
  // Within the grace (1 s) they wait for j, as for a joiner loading at once.
  sim.AdvanceTo(start + absl::Milliseconds(900), absl::Milliseconds(100), &d0);
  EXPECT_FALSE(d0.HasBeenNotified()) << "closed out within the grace";
  // Past it, long before any silent deadline (30 s floor), they do not.
  sim.AdvanceTo(start + absl::Milliseconds(1100), absl::Milliseconds(100), &d0);
  ASSERT_TRUE(sim.Until(d0) && sim.Until(d1)) << "the replicas waited for the entering j";
  EXPECT_LE(clock.SteadyNow() - start, absl::Milliseconds(1100));
  ASSERT_TRUE(r0->ok()) << r0->status();
  ASSERT_TRUE(r1->ok()) << r1->status();
  EXPECT_EQ((*r0)->contributors, 2);
  EXPECT_EQ((*r0)->sum, std::vector<float>(9, 3.f));
  EXPECT_EQ((*r1)->sum, (*r0)->sum);
  EXPECT_EQ((*r0)->left_out, std::vector<NodeId>{ids[2]});
  EXPECT_TRUE(swarm->views[0]->IsAlive(ids[2])) << "closed out, not dead";
  EXPECT_TRUE(swarm->views[1]->IsAlive(ids[2]));

  // j's state is loaded: its round of 4 gets l0's and l1's average.
  GradientContribution zeros = Part(ids[2], 0);
  zeros.flat.assign(9, 0.f);
  zeros.visits = 0;
  groups[2]->AllReduce(4, 1, std::move(zeros), keep(&rj, &dj));
  ASSERT_TRUE(sim.Until(dj)) << "j did not get its entry's result";
  ASSERT_TRUE(rj->ok()) << rj->status();
  EXPECT_TRUE((*rj)->late);
  EXPECT_EQ((*rj)->sum, (*r0)->sum);
  EXPECT_EQ((*rj)->visits, (*r0)->visits);
}

}  // namespace
}  // namespace skipswarm::node
