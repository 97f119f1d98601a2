// Note [Gossiped bans] (node/train/gossiped_bans.h) through real
// GrpcGroupComms on loopback (port 0): stage 1 is averaged by p0, p1 and
// p2; p1 also hosts stage 2 with r0, r1 and r2, which publish bans but
// take no part in stage 1's rounds. p0 and p2 never judge p1 an offender
// (its parts here are honest), so any ban they apply is one they adopted.
// Before gossiped bans no published ban reached the averaging.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/node_id.h"
#include "common/real_clock.h"
#include "gtest/gtest.h"
#include "node/stage/swarm_view.h"
#include "node/train/grpc_group.h"
#include "node/train/grpc_group_test_util.h"

namespace skipswarm::node {
namespace {

using common::NodeId;

constexpr size_t kElements = 20000;
constexpr int kReplicas = 3;  // p0, p1, p2: the replicas of stage 1

std::vector<float> Part(int i) {
  std::vector<float> v(kElements);
  for (size_t k = 0; k < kElements; ++k) {
    v[k] = 0.01f * static_cast<float>((k * 7 + i * 3) % 19) - 0.09f;
  }
  return v;
}

class GossipedBanTest : public ::testing::Test {
 protected:
  // `published`: how many of r0..r2 publish a ban of p1.
  void Start(int published) {
    clock_ = common::RealClock::Create();
    for (int i = 0; i < kReplicas; ++i) ids_.push_back(NodeId::ForName("p" + std::to_string(i)));
    for (int i = 0; i < 3; ++i) reporters_.push_back(NodeId::ForName("r" + std::to_string(i)));
    std::vector<PeerInfo> members;
    for (int i = 0; i < kReplicas; ++i) {
      members.push_back({ids_[i], i == 1 ? std::vector<int>{1, 2} : std::vector<int>{1}, 4, "", ""});
    }
    for (int i = 0; i < 3; ++i) {
      members.push_back({reporters_[i], {2}, 4, "", ""});
      if (i < published) members.back().bans = {ids_[1]};
    }
    // Groups for the replicas only: the reporters run none here.
    auto swarm = grpc_group_testing::StartLoopbackGroups(
        members, clock_.get(),
        [](GrpcGroupOptions& o) { o.probe_timeout = GrpcGroupOptions().probe_timeout; },
        kReplicas);
    ASSERT_TRUE(swarm.ok()) << swarm.status();
    views_ = std::move(swarm->views);
    groups_ = std::move(swarm->groups);
  }

  // One round of stage 1; the parts of p1 that p0 and p2 left out as banned.
  int BannedParts(uint64_t iteration) {
    std::optional<absl::StatusOr<ReduceResult>> r[kReplicas];
    absl::Notification done[kReplicas];
    for (int i = 0; i < kReplicas; ++i) {
      groups_[i]->AllReduce(iteration, 1, {ids_[i], Part(i), 4, 7, nullptr},
                            [&, i](absl::StatusOr<ReduceResult> got) {
                              r[i] = std::move(got);
                              done[i].Notify();
                            });
    }
    int banned = 0;
    for (int i = 0; i < kReplicas; ++i) {
      EXPECT_TRUE(done[i].WaitForNotificationWithTimeout(absl::Seconds(60)));
      if (!r[i].has_value() || !r[i]->ok()) {
        ADD_FAILURE() << "replica " << i << " round " << iteration << " failed";
        continue;
      }
      sums_[i] = (*r[i])->sum;
      for (const PartVerdict& v : (*r[i])->refused_parts) {
        EXPECT_EQ(v.kind, PartVerdict::Kind::kBanned) << DescribeVerdict(v);
        EXPECT_EQ(v.from, ids_[1]);
        EXPECT_NE(i, 1) << "p1 never bans itself";
        banned += v.kind == PartVerdict::Kind::kBanned;
      }
    }
    return banned;
  }

  std::vector<float> sums_[kReplicas];  // of the last round
  std::unique_ptr<common::RealClock> clock_;
  std::vector<NodeId> ids_, reporters_;
  std::vector<std::unique_ptr<StaticSwarmView>> views_;
  std::vector<std::unique_ptr<GrpcGroupComm>> groups_;
};

// p1 shares a stage with p0, p2, r0, r1 and r2: 5 eligible, a quorum is 3.
TEST_F(GossipedBanTest, OneReporterBansNobody) {
  Start(1);
  EXPECT_EQ(BannedParts(0), 0);
  for (int i = 0; i < kReplicas; ++i) EXPECT_TRUE(groups_[i]->adopted_bans().empty());
}

TEST_F(GossipedBanTest, AQuorumIsAdoptedThenLiftedWhenReportersDie) {
  Start(3);
  EXPECT_EQ(BannedParts(0), 2) << "p0 and p2 each leave out p1's part in the shard they own";
  for (int i : {0, 2}) {
    const auto adopted = groups_[i]->adopted_bans();
    ASSERT_EQ(adopted.count(ids_[1]), 1u);
    EXPECT_EQ(adopted.at(ids_[1]).reporters.size(), 3u);
    EXPECT_EQ(adopted.at(ids_[1]).eligible, 5u);
    EXPECT_TRUE(groups_[i]->banned().empty()) << "adopted, not reached here";
    // Note [Banned owners]: p1's own shard too is p0's and p2's parts, with
    // p1's share their mean: p0 and p2 never took p1's reduced shard.
    const std::vector<float> p0 = Part(0), p2 = Part(2);
    ASSERT_EQ(sums_[i].size(), p0.size());
    for (size_t k = 0; k < p0.size(); ++k) {
      ASSERT_NEAR(sums_[i][k], (p0[k] + p2[k]) * 1.5f, 1e-6) << "replica " << i << ", " << k;
    }
  }
  // r1 and r2 die: r0 alone is one word of 3 eligible.
  for (auto& view : views_) {
    view->MarkDead(reporters_[1]);
    view->MarkDead(reporters_[2]);
  }
  EXPECT_EQ(BannedParts(1), 0);
  for (int i = 0; i < kReplicas; ++i) EXPECT_TRUE(groups_[i]->adopted_bans().empty());
}

}  // namespace
}  // namespace skipswarm::node
