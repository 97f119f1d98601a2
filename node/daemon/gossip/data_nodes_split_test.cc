// Note [Data nodes split] (behind_check.h): two data nodes that drop each
// other from stage 0's averaging in one iteration and go on in step. Each
// daemon's side is modelled as GossipDaemon::Parts::SwarmAheadOfUs wires
// it: its TrainingMembers (whose group face holds the drop) and its
// BehindCheck, asked once a second on a simulated clock; a re-entry as
// Parts::Reenter does it (a re-signed record with a higher incarnation and
// a new entry, ForgetLocalVerdicts, the other's stage-0 state). Stage 0's
// parameters are one number per node: averaged together they take the
// same step, alone each takes its own.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/sim_clock.h"
#include "gtest/gtest.h"
#include "node/daemon/gossip/behind_check.h"
#include "node/daemon/gossip/test_members.h"
#include "node/daemon/gossip/training_members.h"

namespace skipswarm::node {
namespace {

using testing::TestMember;
using testing::TestView;

constexpr int kStuckChecks = 5;
constexpr TrainingFace kGroup = TrainingFace::kGroup;

// One data node's daemon side.
struct DataNode {
  explicit DataNode(membership::MemberInfo r, common::SimClock* clock)
      : record(std::move(r)),
        members(record.id),
        check({absl::Seconds(1), /*lead=*/4, /*confirm=*/3, kStuckChecks}, clock) {}
  membership::MemberInfo record;
  TrainingMembers members;
  BehindCheck check;
  uint64_t iteration = 0;
  double params = 1.0;  // stage 0's state
  bool entering = false;  // re-entered; trains from its entry on
  int reentries = 0;
};

// Two data nodes and a relay; d[0] and d[1] go on in step (the relays'
// barrier waits for both), d[1] one iteration on every other second.
class Split {
 public:
  Split() {
    d_.push_back(std::make_unique<DataNode>(TestMember("d0", {0}), &clock_));
    d_.push_back(std::make_unique<DataNode>(TestMember("d1", {0}), &clock_));
    Publish();
  }
  DataNode& d(int i) { return *d_[i]; }
  bool Together() {
    return d(0).members.group()->IsAlive(d(1).record.id) &&
           d(1).members.group()->IsAlive(d(0).record.id);
  }
  // Each drops the other from its replica group (the silent deadline of
  // one iteration, or both probes failing).
  void DropEachOther() {
    d(0).members.group()->MarkDead(d(1).record.id);
    d(1).members.group()->MarkDead(d(0).record.id);
  }
  // One second: one iteration (with stage 0's step) and one check each.
  void Tick(int t) {
    ++base_;
    d(0).iteration = base_;
    d(1).iteration = base_ + static_cast<uint64_t>(t % 2);
    for (int i = 0; i < 2; ++i) d(i).members.SetIteration(d(i).iteration);
    const double g[2] = {0.01 * (t % 7 + 1), 0.02 * (t % 5 + 1)};  // each one's data
    if (Together()) {
      // A re-entered node starts from the other's state at its entry.
      for (int i = 0; i < 2; ++i) {
        if (d(i).entering) d(i).params = d(1 - i).params;
        d(i).entering = false;
      }
      const double mean = (g[0] + g[1]) / 2;
      d(0).params -= mean;
      d(1).params -= mean;
    } else {
      for (int i = 0; i < 2; ++i) {
        if (!d(i).entering) d(i).params -= g[i];
      }
    }
    clock_.Advance(absl::Seconds(1));
    for (int i = 0; i < 2; ++i) {
      DataNode& me = d(i);
      DataNode& other = d(1 - i);
      std::vector<std::pair<common::NodeId, uint64_t>> answered;
      auto ask = [&](int, size_t) {
        answered = {{other.record.id, other.iteration}};
        return std::vector<absl::StatusOr<uint64_t>>{other.iteration};
      };
      auto dropped = [&] {  // as SwarmAheadOfUs
        std::vector<uint64_t> out;
        for (const auto& [id, at] : answered) {
          if (YieldsTo(me.record.id, id) && TrainsIn(other.record, me.iteration, kGroup) &&
              !me.members.group()->IsAlive(id)) {
            out.push_back(at);
          }
        }
        return out;
      };
      std::optional<BehindVerdict> v =
          me.check.PollMember({0}, [&] { return me.iteration; }, ask, dropped);
      if (v.has_value()) Reenter(me, other);
    }
  }

 private:
  // Parts::Reenter, as the peers see it: a re-signed record entering two
  // iterations on, our verdicts forgotten, the other's state at the entry
  // (taken in Tick: the first iteration both group faces list both).
  void Reenter(DataNode& me, const DataNode& from) {
    ++me.reentries;
    me.iteration = from.iteration + 2;
    me.record.incarnation += 1;
    me.record.iteration = me.iteration;
    me.members.ForgetLocalVerdicts();
    me.members.SetIteration(me.iteration);
    me.entering = true;
    me.check.Reset();
    Publish();
  }
  void Publish() {
    const membership::View v = TestView({d(0).record, d(1).record, TestMember("r", {1})}, ++version_);
    for (auto& n : d_) n->members.Update(v);
  }

  common::SimClock clock_;
  std::vector<std::unique_ptr<DataNode>> d_;
  uint64_t base_ = 0;
  uint64_t version_ = 0;
};

// The bug: after both dropped each other, neither was 2 iterations behind,
// so neither re-entered; each averaged stage 0 alone and their parameters
// parted for good. Now the one with the larger id re-enters with the
// other's state within kStuckChecks checks, and from then on they average
// together with equal parameters.
TEST(DataNodesSplitTest, TwoDataNodesThatDroppedEachOtherReMergeWithinTheStuckChecks) {
  Split s;
  for (int t = 0; t < 20; ++t) s.Tick(t);
  ASSERT_TRUE(s.Together());
  ASSERT_DOUBLE_EQ(s.d(0).params, s.d(1).params);
  s.DropEachOther();
  ASSERT_FALSE(s.Together());
  int merged_at = -1;
  for (int t = 20; t < 220; ++t) {
    s.Tick(t);
    if (merged_at < 0 && s.Together()) merged_at = t;
  }
  ASSERT_GE(merged_at, 0) << "never averaged together again in 200 iterations; parameters "
                          << s.d(0).params << " vs " << s.d(1).params;
  EXPECT_LE(merged_at - 20, kStuckChecks + 1);
  EXPECT_TRUE(s.Together());
  EXPECT_DOUBLE_EQ(s.d(0).params, s.d(1).params);
  // Exactly one re-entered: the larger id (YieldsTo).
  const int larger = s.d(0).record.id < s.d(1).record.id ? 1 : 0;
  EXPECT_EQ(s.d(larger).reentries, 1);
  EXPECT_EQ(s.d(1 - larger).reentries, 0);
}

// The cost bound: a data node that answers in step but is dropped again
// after every re-merge (it never averages: each time one silent deadline,
// here 30 s) is re-entered from at most once per stuck_checks << back-off
// checks, the gap doubling up to kSplitBackoffMax; a long calm undoes it.
TEST(DataNodesSplitTest, RepeatedSplitsBackOff) {
  Split s;
  s.DropEachOther();
  std::vector<int> reentry_ticks;
  int together_since = -1;
  int seen = 0;
  for (int t = 0; t < 4000; ++t) {
    s.Tick(t);
    const int n = s.d(0).reentries + s.d(1).reentries;
    if (n > seen) {
      reentry_ticks.push_back(t);
      seen = n;
      together_since = t;
    }
    if (together_since >= 0 && t - together_since == 30) {
      s.DropEachOther();
      together_since = -1;
    }
  }
  ASSERT_GE(reentry_ticks.size(), 8u);
  // Gap = 30 s together + the checks needed, which double from kStuckChecks.
  for (size_t i = 1; i < reentry_ticks.size(); ++i) {
    const int gap = reentry_ticks[i] - reentry_ticks[i - 1];
    const int needed = kStuckChecks << std::min<int>(static_cast<int>(i), kSplitBackoffMax);
    EXPECT_GE(gap, 30 + needed) << i;
    EXPECT_LE(gap, 30 + needed + 2) << i;
  }
  // A calm stretch of stuck_checks << kSplitBackoffMax checks per doubling
  // brings a later honest split back to the first figure.
  Split calm;
  calm.DropEachOther();
  int t = 0;
  for (; calm.d(0).reentries + calm.d(1).reentries == 0; ++t) calm.Tick(t);
  for (int i = 0; i < (kStuckChecks << kSplitBackoffMax); ++i, ++t) calm.Tick(t);
  calm.DropEachOther();
  const int dropped_at = t;
  for (; calm.d(0).reentries + calm.d(1).reentries == 1 && t < dropped_at + 1000; ++t) {
    calm.Tick(t);
  }
  EXPECT_LE(t - dropped_at, kStuckChecks + 1);
}

// A dropped data node two or more behind is stalled, not in step: it
// re-enters itself (Note [Data node behind]); we do not take its state.
TEST(DataNodesSplitTest, ADroppedDataNodeBehindIsNoSplit) {
  common::SimClock clock;
  BehindCheck check({absl::Seconds(1), 4, 3, kStuckChecks}, &clock);
  for (int i = 0; i < 50; ++i) {
    clock.Advance(absl::Seconds(1));
    const uint64_t mine = 100 + static_cast<uint64_t>(i);
    ASSERT_EQ(check.PollMember({0}, [&] { return mine; },
                               [&](int, size_t) {
                                 return std::vector<absl::StatusOr<uint64_t>>{mine - 2};
                               },
                               [&] { return std::vector<uint64_t>{mine - 2}; }),
              std::nullopt)
        << i;
  }
  // Exactly one of a pair yields.
  const common::NodeId a = common::NodeId::ForName("a"), b = common::NodeId::ForName("b");
  EXPECT_NE(YieldsTo(a, b), YieldsTo(b, a));
  EXPECT_FALSE(YieldsTo(a, a));
}

}  // namespace
}  // namespace skipswarm::node
