// GrpcGroupComm over mutual TLS (Note [Peer authentication],
// identity/tls_credentials.h): barrier and averaging work between members
// with valid identities; a push or state request from a certificate that is
// not the claimed sender, or from a peer without a certificate, is refused
// (UNAUTHENTICATED, logged) and the group keeps serving; a member whose
// address answers with another node's certificate is not talked to.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/real_clock.h"
#include "gtest/gtest.h"
#include "identity/identity.h"
#include "identity/test_identity.h"
#include "identity/tls_credentials.h"
#include "node/train/grpc_group.h"
#include "node/train/test_barrier_chunk.h"
#include "node/transport/test_util.h"
#include "proto/stage.grpc.pb.h"
#include "proto/version.h"

namespace skipswarm::node {
namespace {

using ::skipswarm::common::NodeId;
using ::skipswarm::identity::Identity;
using ::skipswarm::identity::PeerCredentials;
using ::skipswarm::node::testutil::LogCapture;

// g0 a data node, g1 and g2 replicas of stage 1, all with TLS identities;
// `intruder` has a valid key of its own but is not a member.
class GrpcGroupTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    clock_ = common::RealClock::Create();
    for (char seed : {'0', '1', '2', 'x'}) {
      keys_.push_back(identity::TestIdentity(seed));
      creds_.push_back(PeerCredentials::Create({keys_.back().get()}, clock_->Now()).value());
    }
    const std::vector<int> stages = {0, 1, 1};
    std::vector<PeerInfo> members;
    for (int i = 0; i < 3; ++i) members.push_back({id(i), {stages[i]}, 4, "", ""});
    for (int i = 0; i < 3; ++i) {
      views_.push_back(std::make_unique<StaticSwarmView>(members));
      GrpcGroupOptions o;
      o.self = id(i);
      o.push_deadline = absl::Seconds(5);
      o.credentials = creds_[i];
      auto g = GrpcGroupComm::Create(o, views_[i].get(), clock_.get());
      ASSERT_TRUE(g.ok()) << g.status();
      groups_.push_back(*std::move(g));
    }
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) views_[i]->SetAddresses(id(j), "", address(j));
    }
  }
  void TearDown() override {
    groups_.clear();
    views_.clear();
  }

  NodeId id(int i) const { return keys_[i]->id(); }
  std::string address(int i) const { return "127.0.0.1:" + std::to_string(groups_[i]->port()); }

  // A StageService stub to member `i` with the given channel credentials.
  std::unique_ptr<proto::StageService::Stub> Stub(
      int i, std::shared_ptr<grpc::ChannelCredentials> credentials) {
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride(identity::kCertificateDnsName);
    return proto::StageService::NewStub(grpc::CreateCustomChannel(address(i), credentials, args));
  }

  // An iteration barrier message claiming to come from `claimed`.
  grpc::Status PushBarrier(proto::StageService::Stub& stub, const NodeId& claimed,
                           uint64_t iteration) {
    grpc::ClientContext context;
    context.set_deadline(common::SystemDeadlineAfter(absl::Seconds(5)));
    auto stream = stub.PushGradients(&context);
    stream->Write(TestBarrierChunk(claimed, iteration));
    stream->WritesDone();
    proto::GradientAck ack;
    stream->Read(&ack);
    return stream->Finish();
  }

  grpc::Status FetchState(proto::StageService::Stub& stub, const NodeId& claimed) {
    grpc::ClientContext context;
    context.set_deadline(common::SystemDeadlineAfter(absl::Seconds(5)));
    proto::StateRequest request;
    request.set_protocol_version(proto::kProtocolVersion);
    request.set_from(claimed.Bytes());
    request.set_stage(1);
    auto reader = stub.FetchState(&context, request);
    proto::StateChunk chunk;
    while (reader->Read(&chunk)) {
    }
    return reader->Finish();
  }

  // All three pass barrier `iteration` (g0 is the data node).
  void PassBarrier(uint64_t iteration) {
    absl::Notification done[3];
    for (int i = 0; i < 3; ++i) {
      groups_[i]->Barrier(iteration, id(i), i == 0, [&done, i](absl::Status s) {
        EXPECT_TRUE(s.ok()) << s;
        done[i].Notify();
      });
    }
    for (auto& d : done) ASSERT_TRUE(d.WaitForNotificationWithTimeout(absl::Seconds(10)));
  }

  std::unique_ptr<common::RealClock> clock_;
  std::vector<std::unique_ptr<Identity>> keys_;  // outlive the groups
  std::vector<std::shared_ptr<const PeerCredentials>> creds_;
  std::vector<std::unique_ptr<StaticSwarmView>> views_;
  std::vector<std::unique_ptr<GrpcGroupComm>> groups_;
};

TEST_F(GrpcGroupTlsTest, BarrierAndAveragingWorkWithValidIdentities) {
  ASSERT_TRUE(groups_[1]->AwaitPeers(absl::Seconds(10)).ok());
  PassBarrier(0);
  const size_t n = 300000;  // more than one 1 MiB chunk
  std::optional<absl::StatusOr<ReduceResult>> r1, r2;
  absl::Notification d1, d2;
  groups_[1]->AllReduce(0, 1,
                        GradientContribution{id(1), std::vector<float>(n, 1.5f), 3, 42, nullptr},
                        [&](absl::StatusOr<ReduceResult> r) { r1 = r; d1.Notify(); });
  groups_[2]->AllReduce(0, 1,
                        GradientContribution{id(2), std::vector<float>(n, 0.25f), 1, 42, nullptr},
                        [&](absl::StatusOr<ReduceResult> r) { r2 = r; d2.Notify(); });
  ASSERT_TRUE(d1.WaitForNotificationWithTimeout(absl::Seconds(10)));
  ASSERT_TRUE(d2.WaitForNotificationWithTimeout(absl::Seconds(10)));
  ASSERT_TRUE(r1->ok() && r2->ok());
  EXPECT_EQ((*r1)->contributors, 2);
  EXPECT_EQ((*r1)->sum, (*r2)->sum);
}

TEST_F(GrpcGroupTlsTest, CreateRefusesMissingCredentialsAndASelfThatIsNotTheKeys) {
  GrpcGroupOptions o;
  o.self = id(0);
  EXPECT_EQ(GrpcGroupComm::Create(o, views_[0].get(), clock_.get()).status().code(),
            absl::StatusCode::kInvalidArgument);  // plain text must be asked for
  o.credentials = creds_[1];
  EXPECT_EQ(GrpcGroupComm::Create(o, views_[0].get(), clock_.get()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(GrpcGroupTlsTest, PushFromACertificateThatIsNotTheClaimedSenderIsRefusedAndLogged) {
  LogCapture log;
  // The intruder's valid certificate, claiming to be the data node g0.
  auto stub = Stub(1, creds_[3]->ForChannel(id(1)));
  grpc::Status s = PushBarrier(*stub, id(0), 1);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
  EXPECT_TRUE(log.WaitFor("refused gradient push"));
  EXPECT_GE(log.Count(id(3).ShortString()), 1);
  // Its forged barrier did not count: g1 still waits for g0's own.
  absl::Notification waiting;
  groups_[1]->Barrier(1, id(1), false, [&](absl::Status) { waiting.Notify(); });
  EXPECT_FALSE(waiting.WaitForNotificationWithTimeout(absl::Milliseconds(200)));
  // Same for a state request; as itself g2 gets past authentication (no
  // state is served yet: UNAVAILABLE).
  s = FetchState(*stub, id(2));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
  EXPECT_TRUE(log.WaitFor("refused state request"));
  auto honest = Stub(1, creds_[2]->ForChannel(id(1)));
  EXPECT_EQ(FetchState(*honest, id(2)).error_code(), grpc::StatusCode::UNAVAILABLE);
  // The group keeps serving.
  absl::Notification d0, d2;
  groups_[0]->Barrier(1, id(0), true, [&](absl::Status) { d0.Notify(); });
  groups_[2]->Barrier(1, id(2), false, [&](absl::Status) { d2.Notify(); });
  EXPECT_TRUE(waiting.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(d0.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(d2.WaitForNotificationWithTimeout(absl::Seconds(10)));
}

TEST_F(GrpcGroupTlsTest, PeerWithoutACertificateIsRefused) {
  grpc::SslCredentialsOptions no_cert;
  no_cert.pem_root_certs = keys_[1]->SelfSignedCertificatePem(clock_->Now()).value();
  auto stub = Stub(1, grpc::SslCredentials(no_cert));
  EXPECT_FALSE(PushBarrier(*stub, id(0), 1).ok());
  auto plain = Stub(1, grpc::InsecureChannelCredentials());
  EXPECT_FALSE(PushBarrier(*plain, id(0), 1).ok());
  PassBarrier(1);  // only g0's own message counted
}

// A StaticSwarmView that says when a member is marked dead.
class WatchedView final : public SwarmView {
 public:
  explicit WatchedView(std::vector<PeerInfo> members) : view_(std::move(members)) {}
  std::vector<PeerInfo> Members() const override { return view_.Members(); }
  bool IsAlive(const NodeId& id) const override { return view_.IsAlive(id); }
  std::vector<NodeId> Replicas(int stage) const override { return view_.Replicas(stage); }
  void MarkDead(const NodeId& id) override {
    view_.MarkDead(id);
    absl::MutexLock lock(&mu_);
    dead_.push_back(id);
  }
  uint64_t version() const override { return view_.version(); }
  std::optional<LinkEstimate> Link(const NodeId& from, const NodeId& to) const override {
    return view_.Link(from, to);
  }
  std::optional<uint64_t> StopAfter(const NodeId& id) const override {
    return view_.StopAfter(id);
  }
  std::optional<uint64_t> Incarnation(const NodeId& id) const override {
    return view_.Incarnation(id);
  }
  // Blocks until `id` is marked dead (false after `timeout`).
  bool WaitDead(const NodeId& id, absl::Duration timeout) {
    auto marked = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return std::find(dead_.begin(), dead_.end(), id) != dead_.end();
    };
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(&marked), timeout);
  }

 private:
  StaticSwarmView view_;
  absl::Mutex mu_;
  std::vector<NodeId> dead_ ABSL_GUARDED_BY(mu_);
};

TEST_F(GrpcGroupTlsTest, MemberWhoseAddressAnswersWithAnotherNodeIsNotTrusted) {
  LogCapture log;
  // A second group with g0's key whose view says g2 lives where g1 serves.
  WatchedView view({{id(0), {0}, 4, "", address(0)},
                    {id(1), {1}, 4, "", address(1)},
                    {id(2), {1}, 4, "", address(1)}});
  GrpcGroupOptions o;
  o.self = id(0);
  o.credentials = creds_[0];
  auto g0 = GrpcGroupComm::Create(o, &view, clock_.get()).value();
  absl::Notification done;
  g0->Barrier(0, id(0), true, [&](absl::Status) { done.Notify(); });
  EXPECT_TRUE(view.WaitDead(id(2), absl::Seconds(10)));  // not trusted: dropped
  EXPECT_TRUE(view.IsAlive(id(1)));                       // the real g1 is fine
  EXPECT_TRUE(log.WaitFor("refused a server while dialling node " + id(2).ShortString()));
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
}

}  // namespace
}  // namespace skipswarm::node
