// The relay's per-sender budgets (relay_service.h, Note [Paced bytes] in
// common/peer_quota.h, Note [Relay directions]), driven over loopback (ports
// picked by the kernel, mutual TLS) with raw Relay streams: N (and, in some
// tests, M) attach and accept by hand, callers A and B open circuits to
// them. The quota runs on a SimClock, so a paused copy resumes only when the
// test advances it.
#include <algorithm>
#include <cstdio>
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
#include "model/model_config.h"
#include "node/daemon/reporting/daemon_quotas.h"
#include "node/transport/relay/relay.grpc.pb.h"
#include "node/transport/relay/relay_service.h"
#include "node/transport/relay/relay_test_util.h"
#include "node/transport/relay/splice.h"
#include "node/transport/test_util.h"

namespace skipswarm::node {
namespace {

using ::skipswarm::node::testutil::RelayData;
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

// N's answers on many circuits and N's pauses, for tests that advance the
// quota's clock only once the relay has done all it can at the current
// time (every circuit has all its answers delivered, or its copy paused).
class AnswerLedger {
 public:
  AnswerLedger(int circuits, int answers_each) : answers_each_(answers_each), answered_(circuits) {}
  // A message of N reached circuit `circuit`'s caller (a drain thread).
  void Answered(int circuit) {
    absl::MutexLock lock(&mu_);
    ++answered_[circuit];
  }
  // N's copy of one circuit paused at `at` for `wait` (on_paced).
  void Paused(absl::Duration at, absl::Duration wait) {
    absl::MutexLock lock(&mu_);
    pauses_.push_back({at, wait});
  }
  // Waits (bounded) until each circuit has all its answers or a pause
  // that lasts past `now`. A circuit pauses at most once until its pause
  // ends, so the count of unfinished circuits equals that of such pauses.
  bool WaitSettled(absl::Duration now) {
    absl::MutexLock lock(&mu_);
    auto settled = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      int unfinished = 0, paused = 0;
      for (int n : answered_) unfinished += n < answers_each_;
      for (const Pause& p : pauses_) paused += p.at + p.wait > now;
      return unfinished == paused;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&settled), kPatience) || settled();
  }
  int64_t answered() {
    absl::MutexLock lock(&mu_);
    int64_t sum = 0;
    for (int n : answered_) sum += n;
    return sum;
  }
  // N's pauses so far, and the longest of those after the first `from`.
  int pauses() {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(pauses_.size());
  }
  absl::Duration longest_after(int from) {
    absl::MutexLock lock(&mu_);
    absl::Duration longest = absl::ZeroDuration();
    for (size_t i = from; i < pauses_.size(); ++i) longest = std::max(longest, pauses_[i].wait);
    return longest;
  }

 private:
  struct Pause {
    absl::Duration at, wait;
  };
  const int answers_each_;
  absl::Mutex mu_;
  std::vector<int> answered_ ABSL_GUARDED_BY(mu_);
  std::vector<Pause> pauses_ ABSL_GUARDED_BY(mu_);
};

class RelayQuotaTest : public ::testing::Test {
 protected:
  // Every caller is a member (no classifier) with `budget`.
  void Start(common::QuotaBudget budget) {
    common::PeerQuotaOptions qo;
    qo.service = "relay";
    qo.member = budget;
    StartWith(std::make_shared<common::PeerQuota>(qo, &sim_));
  }
  // The relay paces on `quota` (its clock: sim_); N attaches.
  void StartWith(std::shared_ptr<common::PeerQuota> quota) {
    quota_ = std::move(quota);
    RelayServiceOptions ro;
    ro.quota = quota_;
    ro.clock = &sim_;
    ro.max_pace = absl::Seconds(5);
    ro.on_paced = [this](const common::NodeId& sender, absl::Duration wait) {
      if (sender == a_->key->id()) {
        paced_a_.Add(1);
      } else if (sender == n_->key->id()) {
        paced_n_.Add(1);
        if (ledger_ != nullptr) ledger_->Paused(sim_.SteadyNow(), wait);
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
    a.calls = node.stub->Attach(&a.context, node.AttachRequest());
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
  // DrainAnswers, counting into ledger_ as circuit `index`.
  void DrainAnswersInto(Circuit& c, int index) {
    c.drain_answers = std::thread([&c, index, ledger = ledger_.get()] {
      proto::RelayBytes m;
      while (c.connect->Read(&m)) ledger->Answered(index);
    });
  }
  static bool Send(Circuit& c, size_t bytes) { return c.connect->Write(RelayData(bytes)); }
  // The attached end answers `bytes` on its Accept stream.
  static bool Answer(Circuit& c, size_t bytes) { return c.accept->Write(RelayData(bytes)); }

  std::unique_ptr<common::RealClock> real_ = common::RealClock::Create();
  common::SimClock sim_;
  std::shared_ptr<common::PeerQuota> quota_;
  std::unique_ptr<TestRelay> relay_;
  std::unique_ptr<RelayParty> n_, m_, a_, b_;
  Attachment n_attached_, m_attached_;
  std::vector<std::unique_ptr<Circuit>> circuits_;
  Counter paced_a_, paced_n_, paced_other_;
  // Set before StartWith by the tests that follow N's pauses.
  std::unique_ptr<AnswerLedger> ledger_;
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

// Note [Relay directions], a node whose record the relay has yet to learn
// (a member that restarted, or a new one): the relay paces its answers as
// a stranger's. Pinned behaviour (README.md, "A node the relay does not
// know yet"): with the daemon's budgets and the attacher's messages, such
// a node answering as many circuits as it may hold, all at once, is slowed
// to a stranger's rate but has no circuit ended (each circuit has one
// message in debt at most, which a stranger's rate pays back within
// max_pace); once the record arrives its next messages are paced as a
// member's, on the circuits it already holds.
TEST_F(RelayQuotaTest, ANodeTheRelayDoesNotKnowYetIsSlowedNotEndedUntilItsRecordArrives) {
  constexpr int kCircuits = 64;  // RelayServiceOptions::max_circuits_per_node
  constexpr int kAnswers = 4;    // per circuit, of the attacher's largest message
  constexpr size_t kMessage = kSpliceChunkBytes;
  const absl::Duration kStep = absl::Milliseconds(100);
  const absl::Duration kRecordAt = absl::Seconds(2);
  ledger_ = std::make_unique<AnswerLedger>(kCircuits, kAnswers);
  DaemonQuotas q = MakeDaemonQuotas(model::ModelConfig(), 4, &sim_);
  const common::NodeId a = identity::TestNodeId('a'), n = identity::TestNodeId('n');
  q.members->SetMembers({a});  // N's record has yet to reach the relay
  StartWith(q.relay);
  const common::QuotaBudget stranger = q.relay->options().stranger;
  const common::QuotaBudget member = q.relay->options().member;
  // Well within a member's budget: a member would never be paused.
  ASSERT_LE(kCircuits * kAnswers * kMessage, member.byte_burst);
  for (int i = 0; i < kCircuits; ++i) {
    Circuit* c = Connected(*a_);
    DrainAnswersInto(*c, i);
  }
  for (const auto& c : circuits_) {
    for (int k = 0; k < kAnswers; ++k) ASSERT_TRUE(Answer(*c, kMessage));
  }
  int64_t answered_unknown = -1;  // by kRecordAt, N still a stranger
  int pauses_unknown = 0;         // N's pauses until then
  absl::Duration all_answered_at;
  for (int step = 0;; ++step) {
    ASSERT_LT(step, 200);
    const absl::Duration now = sim_.SteadyNow();
    ASSERT_TRUE(ledger_->WaitSettled(now)) << now;
    if (ledger_->answered() == kCircuits * kAnswers) {
      all_answered_at = now;
      break;
    }
    if (now >= kRecordAt && answered_unknown < 0) {
      answered_unknown = ledger_->answered();
      pauses_unknown = ledger_->pauses();
      q.members->SetMembers({a, n});  // gossip brings N's record
    }
    sim_.Advance(kStep);
  }
  ASSERT_GE(answered_unknown, 0) << "all answered before the record arrived";
  const absl::Duration longest_unknown = ledger_->longest_after(0);
  const absl::Duration longest_known = ledger_->longest_after(pauses_unknown);
  std::printf("unknown node, %d circuits x %d x %zu B: by %s %lld of %d answered "
              "(stranger burst %.0f B + %.0f B/s); %d pauses before the record, "
              "longest %s; all answered at %s; %d pauses after, longest %s; over_budget %lld\n",
              kCircuits, kAnswers, kMessage, absl::FormatDuration(kRecordAt).c_str(),
              static_cast<long long>(answered_unknown), kCircuits * kAnswers,
              stranger.byte_burst, stranger.bytes_per_second, pauses_unknown,
              absl::FormatDuration(longest_unknown).c_str(),
              absl::FormatDuration(all_answered_at).c_str(), ledger_->pauses() - pauses_unknown,
              absl::FormatDuration(longest_known).c_str(),
              static_cast<long long>(relay_->service->stats().over_budget));
  // No circuit ended: every answer reached its caller.
  EXPECT_EQ(relay_->service->stats().over_budget, 0);
  EXPECT_EQ(quota_->total_refusals(), 0u);
  // Until the record arrived N was held to a stranger's bytes (its burst,
  // then its rate) and paused...
  EXPECT_GE(answered_unknown * kMessage, stranger.byte_burst - kMessage);
  EXPECT_LE(answered_unknown * kMessage,
            stranger.byte_burst + absl::ToDoubleSeconds(kRecordAt) * stranger.bytes_per_second);
  EXPECT_GT(pauses_unknown, 0);
  // ...each pause bounded by one message per circuit in debt, within
  // max_pace.
  EXPECT_LE(absl::ToDoubleSeconds(longest_unknown),
            kCircuits * kMessage / stranger.bytes_per_second);
  EXPECT_LT(longest_unknown, absl::Seconds(5));  // StartWith's max_pace
  // Then a member on the same circuits: the rest went once the pauses
  // begun as a stranger ended, its own pauses (if any) a member's debt.
  EXPECT_LE(all_answered_at, kRecordAt + longest_unknown + kStep);
  EXPECT_LE(absl::ToDoubleSeconds(longest_known),
            kCircuits * kMessage / member.bytes_per_second);
}

// Note [Relay budgets]: the invariant the test above rests on, for the
// smallest model (the smallest frame bound, so the smallest stranger
// rate): a stranger's rate pays back one attacher message on each of a
// node's circuits within max_pace.
TEST(RelayBudgetsTest, AStrangersRatePaysBackAMessagePerCircuitWithinMaxPace) {
  model::ModelConfig tiny;
  tiny.num_layers = 1;
  tiny.num_stages = 1;
  tiny.d_model = 8;
  tiny.num_heads = 1;
  tiny.ffn_dim = 8;
  tiny.seq_len = 1;
  ASSERT_TRUE(tiny.Validate().ok());
  common::SimClock clock;
  const DaemonQuotas q = MakeDaemonQuotas(tiny, 1, &clock);
  const RelayServiceOptions relay;
  EXPECT_GE(q.relay->options().stranger.bytes_per_second * absl::ToDoubleSeconds(relay.max_pace),
            static_cast<double>(relay.max_circuits_per_node) * kSpliceChunkBytes);
}

// The same node while other strangers hold the budget of all strangers
// together (a flood, or many such nodes at once): its answer waits behind
// theirs, past max_pace, and its circuit is ended, as any stranger's
// would be; once the relay knows its record its answers draw on its own
// member budget only. Pinned behaviour (README.md).
TEST_F(RelayQuotaTest, ANodeTheRelayDoesNotKnowYetSharesTheStrangersBudgetUntilItsRecordArrives) {
  DaemonQuotas q = MakeDaemonQuotas(model::ModelConfig(), 4, &sim_);
  const common::NodeId a = identity::TestNodeId('a'), n = identity::TestNodeId('n');
  q.members->SetMembers({a});
  StartWith(q.relay);
  // Bytes the relay just read from other strangers: six seconds of all
  // strangers' rate beyond their burst.
  const common::QuotaBudget all = *q.relay->options().all_strangers;
  ASSERT_TRUE(q.relay
                  ->Pace(common::NodeId::ForName("other strangers"),
                         static_cast<uint64_t>(all.byte_burst + 6 * all.bytes_per_second))
                  .ok());
  Circuit* c = Connected(*a_);
  DrainAnswers(*c);
  ASSERT_TRUE(Answer(*c, 1024));
  ASSERT_TRUE(c->accept_ended.WaitFor(1));
  c->drain.join();
  const grpc::Status ended = c->accept->Finish();
  c->accept_finished = true;
  EXPECT_EQ(ended.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << ended.error_message();
  EXPECT_EQ(c->answered.value(), 0);
  EXPECT_EQ(relay_->service->stats().over_budget, 1);
  // The record arrives: N's next circuit carries its answer at once.
  q.members->SetMembers({a, n});
  Circuit* known = Connected(*a_);
  DrainAnswers(*known);
  ASSERT_TRUE(Answer(*known, kSpliceChunkBytes));
  ASSERT_TRUE(known->answered.WaitFor(1));
  EXPECT_EQ(relay_->service->stats().over_budget, 1);
}

}  // namespace
}  // namespace skipswarm::node
