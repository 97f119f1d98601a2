#include "node/daemon/gossip/behind_check.h"

#include "common/sim_clock.h"
#include "gtest/gtest.h"

namespace skipswarm::node {
namespace {

// Note [Revived members], as the chaos soak found it: a stage-1 replica
// SIGSTOPped for 5 s came back at iteration 372 while its replica was at
// 381. Asked once a second, on the simulated clock.
TEST(BehindCheckTest, AReplicaMoreThanTheLeadAheadMeansBehindOnceASecond) {
  common::SimClock clock;
  BehindCheck check({absl::Seconds(1), 4}, &clock);
  int asked = 0;
  std::vector<absl::StatusOr<uint64_t>> answers = {uint64_t{373}};
  const BehindCheck::Query query = [&] {
    ++asked;
    return answers;
  };
  // In step (a replica one iteration on, as replicas of a stage are).
  EXPECT_EQ(check.Poll(372, query), std::nullopt);
  EXPECT_EQ(asked, 1);
  // The stall: the swarm goes on; nobody asks within the second.
  answers = {uint64_t{381}};
  clock.Advance(absl::Milliseconds(900));
  EXPECT_EQ(check.Poll(372, query), std::nullopt);
  EXPECT_EQ(asked, 1);
  clock.Advance(absl::Milliseconds(100));
  EXPECT_EQ(check.Poll(372, query), std::optional<uint64_t>(381));
  EXPECT_EQ(asked, 2);
  // Re-entered at 383: a new start asks at once and finds it in step.
  check.Reset();
  answers = {uint64_t{383}};
  EXPECT_EQ(check.Poll(383, query), std::nullopt);
  EXPECT_EQ(asked, 3);
}

TEST(BehindCheckTest, WithinTheLeadErrorsAndNoReplicasSayNothing) {
  common::SimClock clock;
  BehindCheck check({absl::Seconds(1), 4}, &clock);
  auto poll = [&](uint64_t own, std::vector<absl::StatusOr<uint64_t>> answers) {
    clock.Advance(absl::Seconds(1));
    return check.Poll(own, [&] { return answers; });
  };
  EXPECT_EQ(poll(100, {uint64_t{104}}), std::nullopt);  // exactly the lead
  EXPECT_EQ(poll(100, {}), std::nullopt);                // the last replica
  EXPECT_EQ(poll(100, {absl::UnavailableError("gone")}), std::nullopt);
  EXPECT_EQ(poll(100, {uint64_t{90}}), std::nullopt);  // it is the one behind
  // The highest answer decides; a dead replica next to it does not hide it.
  EXPECT_EQ(poll(100, {absl::UnavailableError("gone"), uint64_t{101}, uint64_t{140}}),
            std::optional<uint64_t>(140));
}

}  // namespace
}  // namespace skipswarm::node
