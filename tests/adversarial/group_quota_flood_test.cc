// A stranger floods a replica's StageService with what costs it most per
// byte sent: barrier pushes (no data, one bookkeeping entry each, for any
// iteration), pushes that send a first chunk and then stall (each holds a
// server thread), and state requests (each makes the replica serialise and
// send its stage). The client is built from proto/stage.proto alone; the
// replica is the real GrpcGroupComm on loopback (port 0) with Note [Peer
// quotas] (common/peer_quota.h). The quota's clock is simulated and stands
// still, so refills never blur the counts.
#include <grpcpp/grpcpp.h>

#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/node_id.h"
#include "common/peer_quota.h"
#include "common/real_clock.h"
#include "common/sim_clock.h"
#include "gtest/gtest.h"
#include "node/stage/swarm_view.h"
#include "node/train/grpc_group.h"
#include "node/train/test_barrier_chunk.h"
#include "proto/stage.grpc.pb.h"
#include "proto/version.h"

namespace skipswarm::node {
namespace {

using common::NodeId;
using common::PeerClass;
using common::QuotaReason;

class GroupQuotaFloodTest : public ::testing::Test {
 protected:
  void SetUp() override {
    clock_ = common::RealClock::Create();
    for (int i = 0; i < 2; ++i) ids_.push_back(NodeId::ForName("r" + std::to_string(i)));
    std::vector<PeerInfo> members;
    for (int i = 0; i < 2; ++i) members.push_back({ids_[i], {1}, 4, "", ""});
    for (int i = 0; i < 2; ++i) views_.push_back(std::make_unique<StaticSwarmView>(members));
    common::PeerQuotaOptions q;
    q.service = "group";
    q.member = {1000, 1000, 1e9, 1e9, 8};
    q.stranger = {1, 10, 1e5, 1e6, 1};
    // All strangers together (Note [Peer quotas]): above one stranger's
    // budget, so the tests of one stranger meet its own first.
    q.all_strangers = common::QuotaBudget{1, 30, 1e5, 3e6, 3};
    push_quota_ = std::make_shared<common::PeerQuota>(q, &quota_clock_);
    q.service = "state";
    state_quota_ = std::make_shared<common::PeerQuota>(q, &quota_clock_);
    for (auto* quota : {push_quota_.get(), state_quota_.get()}) {
      quota->SetClassifier([this](const NodeId& id) {
        return id == ids_[0] || id == ids_[1] ? PeerClass::kMember : PeerClass::kStranger;
      });
    }
    for (int i = 0; i < 2; ++i) {
      GrpcGroupOptions o;
      o.self = ids_[i];
      o.push_deadline = absl::Seconds(10);
      o.credentials = identity::PeerCredentials::Insecure();
      o.push_quota = push_quota_;
      o.state_quota = state_quota_;
      auto g = GrpcGroupComm::Create(o, views_[i].get(), clock_.get());
      ASSERT_TRUE(g.ok()) << g.status();
      groups_.push_back(*std::move(g));
    }
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 2; ++j) {
        views_[i]->SetAddresses(ids_[j], "", Address(j));
      }
    }
    for (int i = 0; i < 2; ++i) {
      groups_[i]->SetStateProvider(ids_[i], [](int, uint64_t) -> absl::StatusOr<std::string> {
        return std::string(300'000, 's');
      });
    }
    stub_ = proto::StageService::NewStub(
        grpc::CreateChannel(Address(1), grpc::InsecureChannelCredentials()));
  }

  bool HonestRound(uint64_t iteration) {
    std::optional<absl::StatusOr<ReduceResult>> r[2];
    absl::Notification done[2];
    for (int i = 0; i < 2; ++i) {
      groups_[i]->AllReduce(iteration, 1,
                            {ids_[i], std::vector<float>(1000, 1.0f + i), 1, 7, nullptr},
                            [&, i](absl::StatusOr<ReduceResult> got) {
                              r[i] = std::move(got);
                              done[i].Notify();
                            });
    }
    for (int i = 0; i < 2; ++i) {
      if (!done[i].WaitForNotificationWithTimeout(absl::Seconds(30))) return false;
      if (!r[i]->ok()) return false;
    }
    return (*r[0])->sum[0] == 3.0f && (*r[1])->sum[0] == 3.0f;
  }

  grpc::Status Push(const proto::GradientChunk& chunk) {
    grpc::ClientContext context;
    context.set_deadline(common::SystemDeadlineAfter(absl::Seconds(10)));
    auto stream = stub_->PushGradients(&context);
    stream->Write(chunk);
    stream->WritesDone();
    proto::GradientAck ack;
    while (stream->Read(&ack)) {
    }
    return stream->Finish();
  }

  grpc::Status FetchState(const NodeId& from) {
    grpc::ClientContext context;
    context.set_deadline(common::SystemDeadlineAfter(absl::Seconds(10)));
    proto::StateRequest request;
    request.set_protocol_version(proto::kProtocolVersion);
    request.set_from(from.Bytes());
    request.set_stage(1);
    auto reader = stub_->FetchState(&context, request);
    proto::StateChunk chunk;
    while (reader->Read(&chunk)) {
    }
    return reader->Finish();
  }

  std::string Address(int i) { return "127.0.0.1:" + std::to_string(groups_[i]->port()); }

  common::SimClock quota_clock_;  // outlives the groups
  std::shared_ptr<common::PeerQuota> push_quota_, state_quota_;
  std::unique_ptr<common::RealClock> clock_;
  std::vector<NodeId> ids_;
  std::vector<std::unique_ptr<StaticSwarmView>> views_;
  std::vector<std::unique_ptr<GrpcGroupComm>> groups_;
  std::unique_ptr<proto::StageService::Stub> stub_;
};

TEST_F(GroupQuotaFloodTest, AStrangersBarrierFloodIsHeldToItsBurst) {
  const NodeId mallory = NodeId::ForName("mallory");
  int ok = 0, refused = 0;
  for (uint64_t k = 0; k < 200; ++k) {
    grpc::Status s = Push(TestBarrierChunk(mallory, 1'000'000 + k));
    ok += s.ok();
    refused += s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
  }
  std::cout << "FIGURE stranger_barrier_pushes_admitted=" << ok << " refused=" << refused
            << std::endl;
  EXPECT_EQ(ok, 10);  // the stranger's burst; its clock stands still
  EXPECT_EQ(refused, 190);
  EXPECT_EQ((push_quota_->refusals()[{QuotaReason::kMessages, PeerClass::kStranger}]), 190u);
  EXPECT_TRUE(HonestRound(0));
  EXPECT_TRUE(HonestRound(1));
}

// A Sybil burst: 200 fresh identities, each well within its own budget
// (one push of its burst of 10), are held to the budget all strangers share.
TEST_F(GroupQuotaFloodTest, ASybilBurstIsHeldToTheBudgetAllStrangersShare) {
  int ok = 0, refused = 0;
  for (uint64_t k = 0; k < 200; ++k) {
    const NodeId sybil = NodeId::ForName("sybil" + std::to_string(k));
    grpc::Status s = Push(TestBarrierChunk(sybil, 1'000'000 + k));
    ok += s.ok();
    refused += s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
  }
  std::cout << "FIGURE sybil_barrier_pushes_admitted=" << ok << " refused=" << refused
            << std::endl;
  EXPECT_EQ(ok, 30);  // the shared burst, not 200; the clock stands still
  EXPECT_EQ(refused, 170);
  EXPECT_EQ((push_quota_->refusals()[{QuotaReason::kStrangers, PeerClass::kStranger}]), 170u);
  EXPECT_TRUE(HonestRound(0));  // members draw on their own budgets
}

TEST_F(GroupQuotaFloodTest, AStalledPushHoldsTheStrangersOnlyStream) {
  const NodeId mallory = NodeId::ForName("mallory");
  grpc::ClientContext stalled;
  stalled.set_deadline(common::SystemDeadlineAfter(absl::Seconds(20)));
  auto stream = stub_->PushGradients(&stalled);
  proto::GradientChunk first = TestBarrierChunk(mallory, 5);
  first.set_stage(1);
  first.set_phase(1);
  first.set_total_elements(1000);
  first.set_chunk_count(2);
  first.add_members(mallory.Bytes());
  first.mutable_tensor()->set_shape(0, 1000);
  first.set_data(std::string(400, '\0'));
  ASSERT_TRUE(stream->Write(first));  // ... and never the second chunk
  // Once the replica has read that chunk every further push is refused
  // (a push that overtook it would pass): at most a few tries.
  grpc::Status second;
  for (int k = 0; k < 9 && second.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED; ++k) {
    second = Push(TestBarrierChunk(mallory, 6 + k));
  }
  EXPECT_EQ(second.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << second.error_message();
  EXPECT_EQ((push_quota_->refusals()[{QuotaReason::kStreams, PeerClass::kStranger}]), 1u);
  EXPECT_TRUE(HonestRound(0));
  stalled.TryCancel();
  stream->Finish();
}

TEST_F(GroupQuotaFloodTest, AStrangersStateRequestsAreHeldToItsBytes) {
  const NodeId mallory = NodeId::ForName("mallory");
  int ok = 0;
  for (int k = 0; k < 50; ++k) ok += FetchState(mallory).ok();
  // 1 MB of burst, 300,000-byte states.
  std::cout << "FIGURE stranger_state_fetches_served=" << ok << " of 50" << std::endl;
  EXPECT_EQ(ok, 3);
  EXPECT_GE((state_quota_->refusals()[{QuotaReason::kBytes, PeerClass::kStranger}]), 1u);
  EXPECT_EQ(state_quota_->total_refusals(), 47u);
  EXPECT_TRUE(FetchState(ids_[0]).ok());  // a member is served
}

}  // namespace
}  // namespace skipswarm::node
