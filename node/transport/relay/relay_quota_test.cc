// The relay's per-sender budgets (relay_service.h, Note [Paced bytes] in
// common/peer_quota.h, Note [Relay directions]), driven over loopback (ports
// picked by the kernel, mutual TLS) with raw Relay streams: N (and, in some
// tests, M) attach and accept by hand, callers A and B open circuits to
// them. The quota runs on a SimClock, so a paused copy resumes only when the
// test advances it.
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
using ::skipswarm::node::testutil::RelayParty;
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

// An attached node's Attach stream: the circuits the relay announces.
struct Attachment {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<proto::RelayCall>> calls;
};

// A circuit as its two ends see it; each end counts what reaches it.
struct Circuit {
  grpc::ClientContext connect_context, accept_context;
  std::unique_ptr<BytesStream> connect, accept;
  Counter received;  // messages the attached end read
  Counter answered;  // messages the caller's end read (after "spliced")
  Counter accept_ended;  // 1 once the attached end's reads ended
  std::thread drain, drain_answers;
  bool finished = false;         // the Connect stream's status was read
  bool accept_finished = false;  // the Accept stream's
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
    ro.on_paced = [this](const common::NodeId& sender, absl::Duration) {
      if (sender == a_->key->id()) {
        paced_a_.Add(1);
      } else if (sender == n_->key->id()) {
        paced_n_.Add(1);
      } else {
        paced_other_.Add(1);
      }
    };
    relay_ = std::make_unique<TestRelay>('r', real_.get(), ro);
    n_ = Party('n');
    m_ = Party('m');
    a_ = Party('a');
    b_ = Party('b');
    AttachNode(*n_, n_attached_);
  }
  // One node's client of relay_, keyed TestIdentity(seed).
  std::unique_ptr<RelayParty> Party(char seed) const {
    return std::make_unique<RelayParty>(seed, real_.get(), relay_->candidate(), relay_->key->id());
  }
  // `node` attaches (its Attach stream in `a`).
  static void AttachNode(RelayParty& node, Attachment& a) {
    proto::RelayAttachRequest attach;
    attach.set_protocol_version(proto::kProtocolVersion);
    attach.set_swarm_id(kTestSwarm);
    attach.set_node_id(node.key->id().Bytes());
    a.calls = node.stub->Attach(&a.context, attach);
    proto::RelayCall attached;
    ASSERT_TRUE(a.calls->Read(&attached));
  }

  void TearDown() override {
    for (auto& c : circuits_) {
      c->connect_context.TryCancel();
      c->accept_context.TryCancel();
      if (c->drain.joinable()) c->drain.join();
      if (c->drain_answers.joinable()) c->drain_answers.join();
      if (!c->finished) c->connect->Finish();
      if (c->accept != nullptr && !c->accept_finished) c->accept->Finish();
    }
    for (Attachment* a : {&n_attached_, &m_attached_}) {
      a->context.TryCancel();
      if (a->calls != nullptr) a->calls->Finish();
    }
    if (relay_ != nullptr) relay_->Kill();
  }

  // Opens `from`'s Connect to `to` (N when null); the relay's answer when
  // it refuses.
  std::unique_ptr<Circuit> Open(RelayParty& from, const RelayParty* to = nullptr) {
    auto c = std::make_unique<Circuit>();
    c->connect = from.stub->Connect(&c->connect_context);
    proto::RelayBytes first = from.Opening();
    first.set_target((to != nullptr ? *to : *n_).key->id().Bytes());
    EXPECT_TRUE(c->connect->Write(first));
    return c;
  }
  // `node` (attached as `a`) accepts the circuit the relay announces; its
  // end drains into the circuit's `received`. False when no circuit was
  // announced or spliced.
  static bool AcceptAndSplice(Circuit& c, RelayParty& node, Attachment& a) {
    proto::RelayCall call;
    do {
      if (!a.calls->Read(&call)) return false;
    } while (call.circuit() == 0);  // heartbeats
    c.accept = node.stub->Accept(&c.accept_context);
    proto::RelayBytes first = node.Opening();
    first.set_circuit(call.circuit());
    if (!c.accept->Write(first)) return false;
    proto::RelayBytes spliced;
    if (!c.connect->Read(&spliced)) return false;
    c.drain = std::thread([&c] {
      proto::RelayBytes m;
      while (c.accept->Read(&m)) c.received.Add(1);
      c.accept_ended.Add(1);
    });
    return true;
  }
  // The caller's end drains what the attached end answers into the
  // circuit's `answered` (its status is then read at TearDown).
  static void DrainAnswers(Circuit& c) {
    c.drain_answers = std::thread([&c] {
      proto::RelayBytes m;
      while (c.connect->Read(&m)) c.answered.Add(1);
    });
  }
  // A circuit from `from` to N, or to M (attached as m_attached_).
  Circuit* Connected(RelayParty& from, bool to_m = false) {
    RelayParty& node = to_m ? *m_ : *n_;
    circuits_.push_back(Open(from, &node));
    Circuit* c = circuits_.back().get();
    EXPECT_TRUE(AcceptAndSplice(*c, node, to_m ? m_attached_ : n_attached_));
    return c;
  }
  static proto::RelayBytes Data(size_t bytes) {
    proto::RelayBytes m;
    m.set_data(std::string(bytes, 'x'));
    return m;
  }
  static bool Send(Circuit& c, size_t bytes) { return c.connect->Write(Data(bytes)); }
  // The attached end answers `bytes` on its Accept stream.
  static bool Answer(Circuit& c, size_t bytes) { return c.accept->Write(Data(bytes)); }

  std::unique_ptr<common::RealClock> real_ = common::RealClock::Create();
  common::SimClock sim_;
  std::shared_ptr<common::PeerQuota> quota_;
  std::unique_ptr<TestRelay> relay_;
  std::unique_ptr<RelayParty> n_, m_, a_, b_;
  Attachment n_attached_, m_attached_;
  std::vector<std::unique_ptr<Circuit>> circuits_;
  Counter paced_a_, paced_n_, paced_other_;
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

// Note [Relay directions]: the attached node's answers are its own bytes.
TEST_F(RelayQuotaTest, AnAttachedNodeFloodingItsAnswersIsPacedWhileAnotherNodesAreCarried) {
  // 64 KiB/s, burst 64 KiB, per sender.
  Start(common::QuotaBudget{0, 0, kChunk, kChunk, 4});
  AttachNode(*m_, m_attached_);
  Circuit* a = Connected(*a_);               // A's circuit to N
  Circuit* b = Connected(*b_, /*to_m=*/true);  // B's circuit to M
  DrainAnswers(*a);
  DrainAnswers(*b);
  // N answers A's circuit with four chunks at once, A sending nothing: the
  // first is within N's burst, the second puts N a second into debt, and
  // the copy of N's answers stops there.
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(Answer(*a, kChunk));
  ASSERT_TRUE(paced_n_.WaitFor(1));
  ASSERT_TRUE(a->answered.WaitFor(1));
  // M's answers on B's circuit are carried meanwhile.
  ASSERT_TRUE(Answer(*b, 1024));
  ASSERT_TRUE(b->answered.WaitFor(1));
  EXPECT_EQ(a->answered.value(), 1);
  EXPECT_EQ(paced_other_.value(), 0);
  EXPECT_EQ(paced_a_.value(), 0);  // the caller sent nothing: never charged
  // N's answers reach A at its budget's rate on the quota's clock: one
  // chunk (64 KiB) per second, each followed by the next pause.
  for (int second = 1; second <= 2; ++second) {
    sim_.Advance(absl::Seconds(1));
    ASSERT_TRUE(a->answered.WaitFor(1 + second));
    ASSERT_TRUE(paced_n_.WaitFor(1 + second));
    EXPECT_EQ(a->answered.value(), 1 + second) << second;
    // M's next answer is not held behind N's debt.
    ASSERT_TRUE(Answer(*b, 1024));
    ASSERT_TRUE(b->answered.WaitFor(1 + second));
  }
  EXPECT_EQ(paced_other_.value(), 0);
  EXPECT_EQ(relay_->service->stats().paced, 3);
  EXPECT_EQ(quota_->paced(), 3u);
  EXPECT_EQ(quota_->total_refusals(), 0u);
}

TEST_F(RelayQuotaTest, AnAttachedNodeFarOverItsBudgetHasItsCircuitEnded) {
  // 1 KiB/s: a 64 KiB answer is a minute of debt, past max_pace (5 s).
  Start(common::QuotaBudget{0, 0, 1024, 1024, 4});
  AttachNode(*m_, m_attached_);
  Circuit* a = Connected(*a_);
  Circuit* b = Connected(*b_, /*to_m=*/true);
  DrainAnswers(*a);
  DrainAnswers(*b);
  ASSERT_TRUE(Answer(*a, kChunk));
  // The relay ends N's Accept call: N's drain reads to its end first.
  ASSERT_TRUE(a->accept_ended.WaitFor(1));
  a->drain.join();
  const grpc::Status refused = a->accept->Finish();
  a->accept_finished = true;
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(refused.error_message().find("far over its relay byte budget"), std::string::npos)
      << refused.error_message();
  EXPECT_EQ(a->answered.value(), 0);
  // M's answers on B's circuit, within M's own budget, carry on.
  ASSERT_TRUE(Answer(*b, 512));
  ASSERT_TRUE(b->answered.WaitFor(1));
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
