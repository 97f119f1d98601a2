// The relay's per-caller budgets (relay_service.h, Note [Paced bytes] in
// common/peer_quota.h), driven over loopback (ports picked by the kernel,
// mutual TLS) with raw Relay streams: N attaches and accepts by hand, two
// callers A and B open circuits to it. The quota runs on a SimClock, so a
// paused copy resumes only when the test advances it.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/synchronization/mutex.h"
#include "common/peer_quota.h"
#include "common/real_clock.h"
#include "common/sim_clock.h"
#include "gtest/gtest.h"
#include "identity/identity.h"
#include "identity/test_identity.h"
#include "identity/tls_credentials.h"
#include "node/transport/relay/relay.grpc.pb.h"
#include "node/transport/relay/relay_service.h"
#include "node/transport/relay/relay_test_util.h"
#include "node/transport/test_util.h"
#include "proto/version.h"

namespace skipswarm::node {
namespace {

using ::skipswarm::node::testutil::kTestSwarm;
using ::skipswarm::node::testutil::TestRelay;
using BytesStream = grpc::ClientReaderWriter<proto::RelayBytes, proto::RelayBytes>;

constexpr absl::Duration kPatience = absl::Seconds(20);  // real time, bounds every wait

// A count that tests wait for (bounded).
class Counter {
 public:
  void Add(int64_t n) {
    absl::MutexLock lock(&mu_);
    value_ += n;
  }
  int64_t value() {
    absl::MutexLock lock(&mu_);
    return value_;
  }
  bool WaitFor(int64_t at_least) {
    absl::MutexLock lock(&mu_);
    auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return value_ >= at_least; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), kPatience) || reached();
  }

 private:
  absl::Mutex mu_;
  int64_t value_ ABSL_GUARDED_BY(mu_) = 0;
};

// One node's client of the relay.
struct Party {
  Party(char seed, common::Clock* clock, const TestRelay& relay)
      : key(identity::TestIdentity(seed)),
        creds(identity::PeerCredentials::Create({key.get()}, clock->Now()).value()) {
    grpc::ChannelArguments args;
    creds->ConfigureChannel(args);
    stub = proto::Relay::NewStub(grpc::CreateCustomChannel(
        relay.candidate().address, creds->ForChannel(relay.key->id()), args));
  }
  proto::RelayBytes Opening() const {
    proto::RelayBytes m;
    m.set_protocol_version(proto::kProtocolVersion);
    m.set_node_id(key->id().Bytes());
    return m;
  }
  std::unique_ptr<identity::Identity> key;
  std::shared_ptr<const identity::PeerCredentials> creds;
  std::unique_ptr<proto::Relay::Stub> stub;
};

// A circuit as its two ends see it; N's end counts what reaches it.
struct Circuit {
  grpc::ClientContext connect_context, accept_context;
  std::unique_ptr<BytesStream> connect, accept;
  Counter received;  // messages N's end read
  std::thread drain;
  bool finished = false;  // the Connect stream's status was read
};

class RelayQuotaTest : public ::testing::Test {
 protected:
  // Every caller is a member (no classifier) with `budget`.
  void Start(common::QuotaBudget budget) {
    common::PeerQuotaOptions qo;
    qo.service = "relay";
    qo.member = budget;
    quota_ = std::make_shared<common::PeerQuota>(qo, &sim_);
    RelayServiceOptions ro;
    ro.quota = quota_;
    ro.clock = &sim_;
    ro.max_pace = absl::Seconds(5);
    ro.on_paced = [this](const common::NodeId& caller, absl::Duration) {
      (caller == a_->key->id() ? paced_a_ : paced_other_).Add(1);
    };
    relay_ = std::make_unique<TestRelay>('r', real_.get(), ro);
    n_ = std::make_unique<Party>('n', real_.get(), *relay_);
    a_ = std::make_unique<Party>('a', real_.get(), *relay_);
    b_ = std::make_unique<Party>('b', real_.get(), *relay_);
    proto::RelayAttachRequest attach;
    attach.set_protocol_version(proto::kProtocolVersion);
    attach.set_swarm_id(kTestSwarm);
    attach.set_node_id(n_->key->id().Bytes());
    calls_ = n_->stub->Attach(&attach_context_, attach);
    proto::RelayCall attached;
    ASSERT_TRUE(calls_->Read(&attached));
  }

  void TearDown() override {
    for (auto& c : circuits_) {
      c->connect_context.TryCancel();
      c->accept_context.TryCancel();
      if (c->drain.joinable()) c->drain.join();
      if (!c->finished) c->connect->Finish();
      if (c->accept != nullptr) c->accept->Finish();
    }
    attach_context_.TryCancel();
    if (calls_ != nullptr) calls_->Finish();
    if (relay_ != nullptr) relay_->Kill();
  }

  // Opens `from`'s Connect to N; the relay's answer when it refuses.
  std::unique_ptr<Circuit> Open(Party& from) {
    auto c = std::make_unique<Circuit>();
    c->connect = from.stub->Connect(&c->connect_context);
    proto::RelayBytes first = from.Opening();
    first.set_target(n_->key->id().Bytes());
    EXPECT_TRUE(c->connect->Write(first));
    return c;
  }
  // N accepts the circuit the relay announces; its end drains into the
  // circuit's counter. False when no circuit was announced or spliced.
  bool AcceptAndSplice(Circuit& c) {
    proto::RelayCall call;
    do {
      if (!calls_->Read(&call)) return false;
    } while (call.circuit() == 0);  // heartbeats
    c.accept = n_->stub->Accept(&c.accept_context);
    proto::RelayBytes first = n_->Opening();
    first.set_circuit(call.circuit());
    if (!c.accept->Write(first)) return false;
    proto::RelayBytes spliced;
    if (!c.connect->Read(&spliced)) return false;
    c.drain = std::thread([&c] {
      proto::RelayBytes m;
      while (c.accept->Read(&m)) c.received.Add(1);
    });
    return true;
  }
  Circuit* Connected(Party& from) {
    circuits_.push_back(Open(from));
    Circuit* c = circuits_.back().get();
    EXPECT_TRUE(AcceptAndSplice(*c));
    return c;
  }
  static bool Send(Circuit& c, size_t bytes) {
    proto::RelayBytes m;
    m.set_data(std::string(bytes, 'x'));
    return c.connect->Write(m);
  }

  std::unique_ptr<common::RealClock> real_ = common::RealClock::Create();
  common::SimClock sim_;
  std::shared_ptr<common::PeerQuota> quota_;
  std::unique_ptr<TestRelay> relay_;
  std::unique_ptr<Party> n_, a_, b_;
  grpc::ClientContext attach_context_;
  std::unique_ptr<grpc::ClientReader<proto::RelayCall>> calls_;
  std::vector<std::unique_ptr<Circuit>> circuits_;
  Counter paced_a_, paced_other_;
};

constexpr size_t kChunk = 64 << 10;

TEST_F(RelayQuotaTest, AHogIsPacedWhileAnotherCallersCircuitIsCarried) {
  // 64 KiB/s, burst 64 KiB, per caller.
  Start(common::QuotaBudget{0, 0, kChunk, kChunk, 4});
  Circuit* a = Connected(*a_);
  Circuit* b = Connected(*b_);
  // A pushes four chunks at once: the first is within its burst, the
  // second puts it a second into debt, and its copy stops there.
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(Send(*a, kChunk));
  ASSERT_TRUE(paced_a_.WaitFor(1));
  ASSERT_TRUE(a->received.WaitFor(1));
  // B's circuit to the same node still carries its frames meanwhile.
  ASSERT_TRUE(Send(*b, 1024));
  ASSERT_TRUE(b->received.WaitFor(1));
  EXPECT_EQ(a->received.value(), 1);  // A's second chunk waits for its refill
  EXPECT_EQ(paced_other_.value(), 0);
  // A second of the quota's time pays the debt: one more chunk, then the
  // next pause.
  sim_.Advance(absl::Seconds(1));
  ASSERT_TRUE(a->received.WaitFor(2));
  ASSERT_TRUE(paced_a_.WaitFor(2));
  EXPECT_EQ(a->received.value(), 2);
  EXPECT_EQ(relay_->service->stats().paced, 2);
  EXPECT_EQ(quota_->total_refusals(), 0u);
}

TEST_F(RelayQuotaTest, ACallerFarOverItsBudgetHasItsCircuitEnded) {
  // 1 KiB/s: a 64 KiB message is a minute of debt, past max_pace (5 s).
  Start(common::QuotaBudget{0, 0, 1024, 1024, 4});
  Circuit* a = Connected(*a_);
  Circuit* b = Connected(*b_);
  ASSERT_TRUE(Send(*a, kChunk));
  a->connect->WritesDone();
  const grpc::Status refused = a->connect->Finish();
  a->finished = true;
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(refused.error_message().find("far over its relay byte budget"), std::string::npos)
      << refused.error_message();
  EXPECT_EQ(a->received.value(), 0);
  // B's circuit, within its own budget, carries on.
  ASSERT_TRUE(Send(*b, 512));
  ASSERT_TRUE(b->received.WaitFor(1));
  EXPECT_EQ(relay_->service->stats().over_budget, 1);
}

TEST_F(RelayQuotaTest, ACallerHoldingTooManyCircuitsIsRefusedAnother) {
  Start(common::QuotaBudget{0, 0, 0, 0, /*max_streams=*/1});
  Connected(*a_);
  std::unique_ptr<Circuit> second = Open(*a_);
  second->connect->WritesDone();
  const grpc::Status refused = second->connect->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(refused.error_message().find("relay:"), std::string::npos)
      << refused.error_message();
  // Another caller still opens its circuit to the same node.
  Circuit* b = Connected(*b_);
  ASSERT_TRUE(Send(*b, 512));
  ASSERT_TRUE(b->received.WaitFor(1));
}

}  // namespace
}  // namespace skipswarm::node
