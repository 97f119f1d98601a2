#include "common/peer_quota.h"

#include <atomic>
#include <thread>
#include <vector>

#include "common/sim_clock.h"
#include "gtest/gtest.h"

namespace skipswarm::common {
namespace {

PeerQuotaOptions Options() {
  PeerQuotaOptions o;
  o.service = "test";
  o.member = QuotaBudget{/*messages_per_second=*/100, /*message_burst=*/200,
                         /*bytes_per_second=*/1e6, /*byte_burst=*/4e6, /*max_streams=*/4};
  o.stranger = QuotaBudget{2, 4, 1e3, 4e3, 1};
  return o;
}

class PeerQuotaTest : public ::testing::Test {
 protected:
  PeerQuotaTest() : quota_(Options(), &clock_) {
    quota_.SetClassifier([this](const NodeId& id) {
      return id == member_ ? PeerClass::kMember : PeerClass::kStranger;
    });
  }
  int AdmitMany(const NodeId& id, int n, uint64_t bytes) {
    int ok = 0;
    for (int i = 0; i < n; ++i) ok += quota_.Admit(id, bytes).ok();
    return ok;
  }

  SimClock clock_;
  PeerQuota quota_;
  const NodeId member_ = NodeId::ForName("member");
  const NodeId stranger_ = NodeId::ForName("stranger");
};

TEST_F(PeerQuotaTest, StrangerGetsAMuchSmallerMessageBudgetThanAMember) {
  EXPECT_EQ(AdmitMany(member_, 1000, 10), 200);
  EXPECT_EQ(AdmitMany(stranger_, 1000, 10), 4);
  const absl::Status refused = quota_.Admit(stranger_, 10);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("stranger"), std::string::npos) << refused;
  EXPECT_NE(refused.message().find("messages"), std::string::npos) << refused;
  auto refusals = quota_.refusals();
  EXPECT_EQ((refusals[{QuotaReason::kMessages, PeerClass::kMember}]), 800u);
  EXPECT_EQ((refusals[{QuotaReason::kMessages, PeerClass::kStranger}]), 997u);
}

TEST_F(PeerQuotaTest, BucketsRefillWithTheInjectedClock) {
  EXPECT_EQ(AdmitMany(stranger_, 10, 1), 4);
  clock_.Advance(absl::Seconds(1));  // 2 messages/s
  EXPECT_EQ(AdmitMany(stranger_, 10, 1), 2);
  clock_.Advance(absl::Seconds(100));  // never above the burst
  EXPECT_EQ(AdmitMany(stranger_, 10, 1), 4);
}

TEST_F(PeerQuotaTest, BytesAreChargedAndALargeMessageRefusedWhole) {
  // Stranger: 4,000 bytes of burst. One 5,000-byte message never passes.
  EXPECT_EQ(quota_.Admit(stranger_, 5000).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(quota_.Admit(stranger_, 3000).ok());
  EXPECT_EQ(quota_.Admit(stranger_, 2000).code(), absl::StatusCode::kResourceExhausted);
  clock_.Advance(absl::Seconds(1));  // +1,000 bytes
  EXPECT_TRUE(quota_.Admit(stranger_, 2000).ok());
  // The member moves 4 MB at once and 1 MB/s after.
  EXPECT_TRUE(quota_.Admit(member_, 4'000'000).ok());
  EXPECT_FALSE(quota_.Admit(member_, 1'000'000).ok());
  clock_.Advance(absl::Seconds(1));
  EXPECT_TRUE(quota_.Admit(member_, 1'000'000).ok());
  auto refusals = quota_.refusals();
  EXPECT_EQ((refusals[{QuotaReason::kBytes, PeerClass::kStranger}]), 2u);
  EXPECT_EQ((refusals[{QuotaReason::kBytes, PeerClass::kMember}]), 1u);
}

TEST_F(PeerQuotaTest, ConcurrentStreamsAreCappedAndReleased) {
  std::vector<PeerQuota::StreamSlot> slots;
  for (int i = 0; i < 4; ++i) {
    auto slot = quota_.OpenStream(member_);
    ASSERT_TRUE(slot.ok()) << slot.status();
    slots.push_back(std::move(*slot));
  }
  EXPECT_EQ(quota_.OpenStream(member_).status().code(), absl::StatusCode::kResourceExhausted);
  slots.pop_back();  // one stream ends
  EXPECT_TRUE(quota_.OpenStream(member_).ok());
  {
    auto one = quota_.OpenStream(stranger_);
    ASSERT_TRUE(one.ok());
    EXPECT_EQ(quota_.OpenStream(stranger_).status().code(),
              absl::StatusCode::kResourceExhausted);
  }
  EXPECT_TRUE(quota_.OpenStream(stranger_).ok());
  auto refusals = quota_.refusals();
  EXPECT_EQ((refusals[{QuotaReason::kStreams, PeerClass::kMember}]), 1u);
  EXPECT_EQ((refusals[{QuotaReason::kStreams, PeerClass::kStranger}]), 1u);
}

// Note [Stream opens]: a peer that ends each stream at once still opens at
// most its stream-open rate, whatever its message rate allows.
TEST_F(PeerQuotaTest, PaceChargesIntoDebtAndWaitsForTheRefill) {
  // Note [Paced bytes]. The stranger's bucket: 1,000 bytes/s, burst 4,000.
  EXPECT_EQ(quota_.Pace(stranger_, 4000).value(), absl::ZeroDuration());
  EXPECT_EQ(quota_.Pace(stranger_, 1500).value(), absl::Milliseconds(1500));
  // Its debt adds up; a message larger than the burst is charged too.
  EXPECT_EQ(quota_.Pace(stranger_, 5000).value(), absl::Milliseconds(6500));
  EXPECT_EQ(quota_.paced(), 2u);
  EXPECT_EQ(quota_.total_refusals(), 0u);  // a pause is not a refusal
  clock_.Advance(absl::Milliseconds(6500));
  EXPECT_EQ(quota_.Pace(stranger_, 500).value(), absl::Milliseconds(500));
  // A member's bucket is its own: 4 MB of burst.
  EXPECT_EQ(quota_.Pace(member_, 4'000'000).value(), absl::ZeroDuration());
}

TEST(PacedBytesTest, StrangersShareTheirBudgetAndAClosedOneIsRefused) {
  SimClock clock;
  PeerQuotaOptions o = Options();
  o.all_strangers = QuotaBudget{0, 0, 2e3, 4e3, 0};
  PeerQuota quota(o, &clock);
  quota.SetClassifier([](const NodeId&) { return PeerClass::kStranger; });
  EXPECT_EQ(quota.Pace(NodeId::ForName("a"), 4000).value(), absl::ZeroDuration());
  // b's own bucket is full, all strangers' is not: 3,000 bytes at 2,000/s.
  EXPECT_EQ(quota.Pace(NodeId::ForName("b"), 3000).value(), absl::Milliseconds(1500));
  o.stranger.closed = true;
  PeerQuota closed(o, &clock);
  closed.SetClassifier([](const NodeId&) { return PeerClass::kStranger; });
  EXPECT_EQ(closed.Pace(NodeId::ForName("a"), 1).status().code(),
            absl::StatusCode::kPermissionDenied);
}

TEST(StreamOpensTest, OpeningsHaveTheirOwnBucketAndAHeldRefusalWaitsForIt) {
  SimClock clock;
  PeerQuotaOptions o = Options();
  o.stranger.stream_opens_per_second = 1;
  o.stranger.stream_open_burst = 2;
  o.max_hold = absl::Seconds(1);
  PeerQuota quota(o, &clock);
  quota.SetClassifier([](const NodeId&) { return PeerClass::kStranger; });
  const NodeId peer = NodeId::ForName("opener");
  // The burst: two streams, each closed at once (the messages allow 4).
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(quota.OpenStream(peer).ok()) << i;
  const absl::Status third = quota.OpenStream(peer).status();
  EXPECT_EQ(third.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(third.message().find("stream_opens quota (1 stream opens/s, burst 2)"),
            std::string::npos)
      << third;
  // Asked again at once: held until the bucket has a stream (1 s at 1/s).
  clock.Advance(absl::Seconds(0.25));
  EXPECT_EQ(PeerQuota::HoldOf(quota.OpenStream(peer).status()), absl::Seconds(0.75));
  // A refused opening costs no message: the two left still admit frames.
  EXPECT_TRUE(quota.Admit(peer, 1).ok());
  EXPECT_TRUE(quota.Admit(peer, 1).ok());
  clock.Advance(absl::Seconds(0.75));
  EXPECT_TRUE(quota.OpenStream(peer).ok());
  EXPECT_EQ((quota.refusals()[{QuotaReason::kStreamOpens, PeerClass::kStranger}]), 2u);
  // At a quarter of a stream a second the hold waits for the next one,
  // past max_hold, up to max_stream_open_hold.
  o.stranger.stream_opens_per_second = 0.25;
  o.max_stream_open_hold = absl::Seconds(5);
  PeerQuota slow(o, &clock);
  slow.SetClassifier([](const NodeId&) { return PeerClass::kStranger; });
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(slow.OpenStream(peer).ok()) << i;
  EXPECT_EQ(PeerQuota::HoldOf(slow.OpenStream(peer).status()), absl::ZeroDuration());
  EXPECT_EQ(PeerQuota::HoldOf(slow.OpenStream(peer).status()), absl::Seconds(4));
  EXPECT_EQ(PeerQuota::HoldOf(slow.Admit(peer, 1e9)), absl::Seconds(1));  // max_hold
  // Unset (the members here), openings are bounded by messages only.
  PeerQuota members(Options(), &clock);
  int opened = 0;
  for (int i = 0; i < 100; ++i) opened += members.OpenStream(peer).ok();
  EXPECT_EQ(opened, 100);
}

TEST_F(PeerQuotaTest, ASybilBurstCannotGrowTheTableOrCrowdOutMembers) {
  PeerQuotaOptions o = Options();
  o.max_peers = 16;
  PeerQuota quota(o, &clock_);
  quota.SetClassifier([this](const NodeId& id) {
    return id == member_ ? PeerClass::kMember : PeerClass::kStranger;
  });
  int refused = 0;
  for (int i = 0; i < 1000; ++i) {
    // Each identity spends its whole burst, so none is full again.
    const NodeId sybil = NodeId::ForName("sybil" + std::to_string(i));
    for (int k = 0; k < 4; ++k) refused += !quota.Admit(sybil, 1).ok();
  }
  EXPECT_LE(quota.tracked_peers(), 16u);
  EXPECT_GE(refused, 900 * 4);
  EXPECT_TRUE(quota.Admit(member_, 1).ok());  // a member always gets a bucket
  EXPECT_GE((quota.refusals()[{QuotaReason::kPeers, PeerClass::kStranger}]), 900u);
  // Once their buckets are full again the table makes room for newcomers.
  clock_.Advance(absl::Seconds(10));
  EXPECT_TRUE(quota.Admit(NodeId::ForName("latecomer"), 1).ok());
}

// Note [Peer quotas]: many strangers, each well within its own budget, are
// held to one budget all together; members never draw on it.
TEST_F(PeerQuotaTest, AllStrangersTogetherAreHeldToTheSharedBudget) {
  PeerQuotaOptions o = Options();
  o.all_strangers = QuotaBudget{/*messages_per_second=*/10, /*message_burst=*/20,
                                /*bytes_per_second=*/1e3, /*byte_burst=*/10e3,
                                /*max_streams=*/3};
  PeerQuota quota(o, &clock_);
  quota.SetClassifier([this](const NodeId& id) {
    return id == member_ ? PeerClass::kMember : PeerClass::kStranger;
  });
  uint64_t admitted_bytes = 0;
  int admitted = 0;
  for (int i = 0; i < 200; ++i) {
    // One message of 1,000 bytes each: within every stranger's own
    // budget (burst 4 messages, 4,000 bytes).
    const NodeId sybil = NodeId::ForName("sybil" + std::to_string(i));
    if (quota.Admit(sybil, 1000).ok()) {
      ++admitted;
      admitted_bytes += 1000;
    }
  }
  EXPECT_EQ(admitted, 10);  // the shared byte burst, not 200 x 1,000 bytes
  EXPECT_EQ(admitted_bytes, 10000u);
  EXPECT_EQ((quota.refusals()[{QuotaReason::kStrangers, PeerClass::kStranger}]), 190u);
  const absl::Status refused = quota.Admit(NodeId::ForName("one more"), 1000);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("all strangers together"), std::string::npos) << refused;
  // A member is untouched by the strangers' flood.
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(quota.Admit(member_, 1000).ok());
  // The shared bucket refills at its rate.
  clock_.Advance(absl::Seconds(2));
  EXPECT_TRUE(quota.Admit(NodeId::ForName("later"), 1000).ok());
  EXPECT_TRUE(quota.Admit(NodeId::ForName("later 2"), 1000).ok());
  EXPECT_FALSE(quota.Admit(NodeId::ForName("later 3"), 1000).ok());

  // Streams: one each allowed, three for all strangers together.
  std::vector<PeerQuota::StreamSlot> slots;
  int opened = 0;
  for (int i = 0; i < 50; ++i) {
    absl::StatusOr<PeerQuota::StreamSlot> slot =
        quota.OpenStream(NodeId::ForName("streamer" + std::to_string(i)));
    if (slot.ok()) {
      ++opened;
      slots.push_back(std::move(*slot));
    }
  }
  EXPECT_EQ(opened, 3);
  EXPECT_EQ(quota.stranger_streams(), 3);
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(quota.OpenStream(member_).ok());
  slots.pop_back();  // a stranger's stream closes: one more may open
  EXPECT_EQ(quota.stranger_streams(), 2);
  EXPECT_TRUE(quota.OpenStream(NodeId::ForName("streamer 99")).ok());
  EXPECT_EQ(quota.stranger_streams(), 2);  // the slot above was dropped at once
}

// Note [Joiners' budget]: while the strangers' shared budget is empty, a
// stranger whose message proves it is joining draws on the joiners' budget;
// one whose proof fails is refused as before, and the proof is asked only
// while the shared budget is short.
TEST_F(PeerQuotaTest, AProvenJoinerDrawsOnTheJoinersBudgetWhileStrangersAreFlooding) {
  PeerQuotaOptions o = Options();
  o.all_strangers = QuotaBudget{10, 20, 0, 0, 0};
  o.joiners = QuotaBudget{1, 2, 0, 0, 0};
  PeerQuota quota(o, &clock_);
  quota.SetClassifier([](const NodeId&) { return PeerClass::kStranger; });
  int proofs = 0;
  auto proven = [&] { ++proofs; return true; };
  auto forged = [&] { ++proofs; return false; };
  // The shared budget admits the first 20 without asking a proof.
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(quota.AdmitJoiner(NodeId::ForName("sybil" + std::to_string(i)), 10, forged).ok());
  }
  EXPECT_EQ(proofs, 0);
  // Flooded: forged proofs are refused "strangers" and take nothing.
  for (int i = 0; i < 50; ++i) {
    const absl::Status s = quota.AdmitJoiner(NodeId::ForName("forger" + std::to_string(i)), 10,
                                             forged);
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  }
  EXPECT_EQ(proofs, 50);
  EXPECT_EQ((quota.refusals()[{QuotaReason::kStrangers, PeerClass::kStranger}]), 50u);
  EXPECT_EQ(quota.joiners_admitted(), 0u);
  // Joiners get the joiners' burst (2), then are refused "joiners".
  EXPECT_TRUE(quota.AdmitJoiner(NodeId::ForName("joiner1"), 10, proven).ok());
  EXPECT_TRUE(quota.AdmitJoiner(NodeId::ForName("joiner2"), 10, proven).ok());
  const absl::Status third = quota.AdmitJoiner(NodeId::ForName("joiner3"), 10, proven);
  EXPECT_EQ(third.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(third.message().find("proven joiners together"), std::string::npos) << third;
  EXPECT_EQ((quota.refusals()[{QuotaReason::kJoiners, PeerClass::kStranger}]), 1u);
  EXPECT_EQ(quota.joiners_admitted(), 2u);
  // A plain Admit never draws on it.
  EXPECT_FALSE(quota.Admit(NodeId::ForName("plain"), 10).ok());
  // A second later both refill (10 and 1); the flood takes its 10 again.
  clock_.Advance(absl::Seconds(1));
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(quota.Admit(NodeId::ForName("later" + std::to_string(i)), 10).ok());
  }
  EXPECT_TRUE(quota.AdmitJoiner(NodeId::ForName("joiner3"), 10, proven).ok());
  EXPECT_EQ(quota.joiners_admitted(), 3u);
}

// AdmitJoinerKey (the manifest's callers, known by address): a proven call
// is charged to the joiner's key, not its address, so many addresses that
// carry one proof share one stranger's budget; an empty joiner key proves
// nothing and the proof is not asked.
TEST_F(PeerQuotaTest, AddressesSharingOneJoinerKeyShareItsBudget) {
  PeerQuotaOptions o = Options();
  o.stranger = QuotaBudget{1, 3, 0, 0, 0};
  o.all_strangers = QuotaBudget{10, 1, 0, 0, 0};
  o.joiners = QuotaBudget{100, 100, 0, 0, 0};
  PeerQuota quota(o, &clock_);
  int proofs = 0;
  auto proven = [&] { ++proofs; return true; };
  ASSERT_TRUE(quota.AdmitKey("ipv4:10.0.0.1", PeerClass::kStranger, 10).ok());  // spends it
  int admitted = 0;
  for (int i = 0; i < 20; ++i) {
    admitted += quota.AdmitJoinerKey("ipv4:10.0.1." + std::to_string(i), "invite:aa", 10, proven)
                    .ok();
  }
  EXPECT_EQ(admitted, 3);  // the invite's own stranger burst
  EXPECT_EQ(quota.joiners_admitted(), 3u);
  EXPECT_EQ((quota.refusals()[{QuotaReason::kMessages, PeerClass::kStranger}]), 17u);
  const int asked = proofs;
  EXPECT_FALSE(quota.AdmitJoinerKey("ipv4:10.0.2.1", "", 10, proven).ok());
  EXPECT_EQ(proofs, asked);
  EXPECT_EQ((quota.refusals()[{QuotaReason::kStrangers, PeerClass::kStranger}]), 1u);
}

// Note [Joiners' budget]: one proven identity calling continuously while a
// Sybil flood holds the strangers' budget gets its own joiner budget, not
// the joiners' whole budget, and a second proven identity trying once a
// second is admitted every time.
TEST_F(PeerQuotaTest, OneProvenKeyCannotTakeTheJoinersBudget) {
  PeerQuotaOptions o = Options();
  o.stranger = QuotaBudget{20, 50, 0, 0, 0};
  o.all_strangers = QuotaBudget{200, 500, 0, 0, 0};
  o.joiners = QuotaBudget{20, 40, 0, 0, 0};
  o.joiner = QuotaBudget{1, 3, 0, 0, 0};
  PeerQuota quota(o, &clock_);
  auto proven = [] { return true; };
  int sybil = 0, flooder = 0, honest = 0;
  for (int i = 0; i < 500; ++i) {  // the flood empties the strangers' burst first
    ASSERT_TRUE(quota.AdmitKey("burst" + std::to_string(i), PeerClass::kStranger, 10).ok());
  }
  constexpr int kSteps = 500;  // 5 s of 10 ms
  for (int step = 0; step < kSteps; ++step) {
    // The flood takes whatever the strangers' budget refilled.
    for (int i = 0; i < 10; ++i) {
      quota.AdmitKey("sybil" + std::to_string(sybil++ % 1000), PeerClass::kStranger, 10)
          .IgnoreError();
    }
    for (int i = 0; i < 50; ++i) {
      flooder += quota.AdmitJoinerKey("ipv4:10.0.0.9", "work:flooder", 10, proven).ok();
    }
    if (step % 100 == 0) {
      const absl::Status s = quota.AdmitJoinerKey("ipv4:10.0.0.7", "work:honest", 10, proven);
      EXPECT_TRUE(s.ok()) << "at step " << step << ": " << s;
      honest += s.ok();
    }
    clock_.Advance(absl::Milliseconds(10));
  }
  // Its burst and one a second, not the joiners' 40 + 20 a second.
  EXPECT_LE(flooder, 3 + 5);
  EXPECT_EQ(honest, kSteps / 100);
  EXPECT_EQ(quota.joiners_admitted(), static_cast<uint64_t>(flooder + honest));
  // The flooder's own bucket refuses it, not the joiners'.
  EXPECT_EQ((quota.refusals()[{QuotaReason::kJoiners, PeerClass::kStranger}]), 0u);
}

TEST_F(PeerQuotaTest, UnlimitedBudgetAndNoClassifierAdmitEverything) {
  PeerQuotaOptions open;
  open.service = "open";
  PeerQuota quota(open, &clock_);
  EXPECT_EQ(quota.ClassOf(stranger_), PeerClass::kMember);
  for (int i = 0; i < 10000; ++i) ASSERT_TRUE(quota.Admit(stranger_, 1 << 30).ok());
  std::vector<PeerQuota::StreamSlot> slots;
  for (int i = 0; i < 100; ++i) slots.push_back(*quota.OpenStream(stranger_));
  EXPECT_EQ(quota.total_refusals(), 0u);
}


// Note [Refusal hold].
class RefusalHoldTest : public PeerQuotaTest {
 protected:
  RefusalHoldTest() : held_quota_(HoldOptions(), &clock_) {
    held_quota_.SetClassifier([this](const NodeId& id) {
      return id == member_ ? PeerClass::kMember : PeerClass::kStranger;
    });
  }
  static PeerQuotaOptions HoldOptions() {
    PeerQuotaOptions o = Options();
    o.max_hold = absl::Seconds(1);
    o.max_held_calls = 1;
    return o;
  }
  PeerQuota held_quota_;
};

TEST_F(RefusalHoldTest, ARepeatedRefusalIsHeldUntilTheBucketWouldAdmitIt) {
  // Stranger: 2 messages/s, burst 4.
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(held_quota_.Admit(stranger_, 1).ok());
  const absl::Status first = held_quota_.Admit(stranger_, 1);
  EXPECT_EQ(first.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(PeerQuota::HoldOf(first), absl::ZeroDuration());  // answered at once
  const absl::Status again = held_quota_.Admit(stranger_, 1);
  EXPECT_EQ(PeerQuota::HoldOf(again), absl::Seconds(0.5));  // one token at 2/s
  clock_.Advance(absl::Seconds(0.3));
  EXPECT_EQ(PeerQuota::HoldOf(held_quota_.Admit(stranger_, 1)), absl::Seconds(0.2));
  clock_.Advance(absl::Seconds(0.2));
  EXPECT_TRUE(held_quota_.Admit(stranger_, 1).ok());
  // Quiet for longer than the repeat window: the next refusal is at once.
  clock_.Advance(absl::Seconds(1.5));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(held_quota_.Admit(stranger_, 1).ok());
  EXPECT_EQ(PeerQuota::HoldOf(held_quota_.Admit(stranger_, 1)), absl::ZeroDuration());
  // Without max_hold (the default) nothing is ever held.
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(PeerQuota::HoldOf(quota_.Admit(stranger_, 1)), absl::ZeroDuration());
  }
}

TEST_F(RefusalHoldTest, RefusalsNoWaitCuresAreHeldTheMaximum) {
  // A message larger than the byte burst (4,000) never fits.
  EXPECT_EQ(PeerQuota::HoldOf(held_quota_.Admit(stranger_, 5000)), absl::ZeroDuration());
  EXPECT_EQ(PeerQuota::HoldOf(held_quota_.Admit(stranger_, 5000)), absl::Seconds(1));
  // A second stream beside the stranger's one.
  auto one = held_quota_.OpenStream(stranger_);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(PeerQuota::HoldOf(held_quota_.OpenStream(stranger_).status()), absl::Seconds(1));
  // A closed budget (members only): the first refusal at once, then held.
  PeerQuotaOptions o = HoldOptions();
  o.stranger = QuotaBudget{0, 0, 0, 0, 0, /*closed=*/true};
  PeerQuota closed(o, &clock_);
  closed.SetClassifier([](const NodeId&) { return PeerClass::kStranger; });
  const absl::Status denied = closed.Admit(stranger_, 1);
  EXPECT_EQ(denied.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(PeerQuota::HoldOf(denied), absl::ZeroDuration());
  EXPECT_EQ(PeerQuota::HoldOf(closed.Admit(stranger_, 1)), absl::Seconds(1));
}

TEST_F(RefusalHoldTest, HoldRefusalBlocksUntilTheClockPassesTheHold) {
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(held_quota_.Admit(stranger_, 1).ok());
  ASSERT_FALSE(held_quota_.Admit(stranger_, 1).ok());
  const absl::Status held = held_quota_.Admit(stranger_, 1);
  ASSERT_EQ(PeerQuota::HoldOf(held), absl::Seconds(0.5));
  std::atomic<bool> answered{false};
  std::thread handler([&] {
    held_quota_.HoldRefusal(held);
    answered = true;
  });
  // The handler counts itself held before it sets its timer: wait for the
  // timer, or the clock could pass the hold before it is set.
  while (clock_.pending_timers() == 0) std::this_thread::yield();
  // max_held_calls = 1: a second refusal is answered at once.
  held_quota_.HoldRefusal(held);
  EXPECT_EQ(held_quota_.held_now(), 1);
  clock_.Advance(absl::Seconds(0.4));
  EXPECT_FALSE(answered.load());
  clock_.Advance(absl::Seconds(0.1));
  handler.join();
  EXPECT_TRUE(answered.load());
  EXPECT_EQ(held_quota_.held_now(), 0);
  EXPECT_EQ(held_quota_.held_refusals(), 1u);
}

TEST_F(RefusalHoldTest, AnswerAfterHoldAnswersOnTheClocksTimerEvenAfterTheQuotaIsGone) {
  int answers = 0;
  {
    PeerQuota quota(HoldOptions(), &clock_);
    quota.SetClassifier([](const NodeId&) { return PeerClass::kStranger; });
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(quota.Admit(stranger_, 1).ok());
    const absl::Status first = quota.Admit(stranger_, 1);
    quota.AnswerAfterHold(first, [&] { ++answers; });
    EXPECT_EQ(answers, 1);  // no hold: at once
    quota.AnswerAfterHold(quota.Admit(stranger_, 1), [&] { ++answers; });
    EXPECT_EQ(answers, 1);
    EXPECT_EQ(quota.held_now(), 1);
  }
  clock_.Advance(absl::Seconds(0.5));
  EXPECT_EQ(answers, 2);
}

}  // namespace
}  // namespace skipswarm::common
