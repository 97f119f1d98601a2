#include "node/daemon/gossip/join_role.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace skipswarm::node {
namespace {

const common::NodeId kMe = common::NodeId::ForName("me");

membership::MemberInfo Member(const std::string& name, std::vector<uint32_t> stages,
                              bool subnetwork = false) {
  membership::MemberInfo m;
  m.id = common::NodeId::ForName(name);
  m.stages = std::move(stages);
  m.subnetwork = subnetwork;
  m.memory_slots = 4;
  m.seconds_per_layer_per_sample = 1e-3;
  m.addresses = {name + ":g", name + ":p", name + ":r", name + ":s"};
  return m;
}

// A 4-stage pipeline swarm (d, a, b, c) and one SDP worker (w, stages
// {0, 1, 3}), all 10 ms apart on 1 GB/s links; the joiner's links to each
// are `rtt` and `bytes_per_second` (both directions measured).
membership::View Swarm(absl::Duration rtt, double bytes_per_second) {
  membership::View v;
  v.members = {Member("d", {0}), Member("a", {1}), Member("b", {2}), Member("c", {3}),
               Member("w", {0, 1, 3}, /*subnetwork=*/true)};
  std::sort(v.members.begin(), v.members.end(),
            [](const auto& x, const auto& y) { return x.id < y.id; });
  for (const auto& x : v.members) {
    for (const auto& y : v.members) {
      if (x.id != y.id) v.links.push_back({x.id, y.id, absl::Milliseconds(20), 1e9, {}, {}});
    }
    v.links.push_back({x.id, kMe, rtt, bytes_per_second, {}, {}});
    v.links.push_back({kMe, x.id, rtt, bytes_per_second, {}, {}});
  }
  return v;
}

// 1e8 parameters (25 M per stage: 0.37 GiB trained), 0.25 GiB of
// activations per MB and stage, P = 3, averaging every 32 steps.
JoinRoleInputs Inputs() {
  JoinRoleInputs in;
  in.model.shape.num_stages = 4;
  in.model.shape.layers_per_stage = 4;
  in.model.shape.samples_per_mb = 4;
  in.model.shape.bytes_per_mb = 4 << 20;
  in.model.params = 1e8;
  in.model.activation_gib = 0.25;
  in.model.sdp_stages = 3;
  in.workload.mb_per_data_node = 6;
  in.workload.path_length = 4;
  in.averaging.outer_every = 32;
  return in;
}

TEST(JoinRoleTest, AFarNodeWithGoodUplinkTrainsASubnetwork) {
  // 400 ms away from everyone: every pipeline hop through it costs more
  // than its own micro-batches, which need no hop at all.
  absl::StatusOr<JoinRole> r = ChooseJoinRole(Swarm(absl::Milliseconds(800), 1e9), kMe, Inputs());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->sdp) << r->pipeline_tokens_per_s << " vs " << r->sdp_tokens_per_s;
  EXPECT_GT(r->sdp_tokens_per_s, r->pipeline_tokens_per_s);
  // w covers middle stage 1: the joiner takes stage 2.
  EXPECT_EQ(r->stages, (std::vector<int>{0, 2, 3}));
}

TEST(JoinRoleTest, ASlowUplinkKeepsTheNodeOnOneStage) {
  // The same node measured at 0.1 MB/s: averaging three stages costs it
  // three times what averaging one does.
  absl::StatusOr<JoinRole> r = ChooseJoinRole(Swarm(absl::Milliseconds(800), 1e5), kMe, Inputs());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->sdp) << r->pipeline_tokens_per_s << " vs " << r->sdp_tokens_per_s;
  EXPECT_EQ(r->stages.size(), 1u);
}

TEST(JoinRoleTest, ASlowComputeKeepsTheNodeOnOneStage) {
  JoinRoleInputs in = Inputs();
  in.sec_per_layer_sample = 0.1;  // 100x the others: its own MBs would set the pace
  absl::StatusOr<JoinRole> r = ChooseJoinRole(Swarm(absl::Milliseconds(800), 1e9), kMe, in);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->sdp) << r->pipeline_tokens_per_s << " vs " << r->sdp_tokens_per_s;
}

TEST(JoinRoleTest, MemoryForOneStageOnlyMeansPipeline) {
  JoinRoleInputs in = Inputs();
  in.memory_gib = 1.0;  // one stage and its MB slots; not three stages
  absl::StatusOr<JoinRole> r = ChooseJoinRole(Swarm(absl::Milliseconds(800), 1e9), kMe, in);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->sdp);
  EXPECT_EQ(r->sdp_tokens_per_s, 0);
  EXPECT_GT(r->pipeline_tokens_per_s, 0);
}

TEST(JoinRoleTest, NeitherRoleFittingIsAClearError) {
  JoinRoleInputs in = Inputs();
  in.memory_gib = 0.1;
  absl::StatusOr<JoinRole> r = ChooseJoinRole(Swarm(absl::Milliseconds(800), 1e9), kMe, in);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("neither role"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("subnetwork of 3 stages"), std::string::npos) << r.status();
  in.model.params = 0;
  EXPECT_EQ(ChooseJoinRole(Swarm(absl::Milliseconds(800), 1e9), kMe, in).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace skipswarm::node
