// Note [Entry in the group] (grpc_group_push.cc): a member that re-enters
// at an entry far past the iteration it was stuck in admits its replicas'
// pushes for the entry before its own trainer gets there.
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

}  // namespace
}  // namespace skipswarm::node
