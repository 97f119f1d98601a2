#include "common/peer_log_limiter.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace skipswarm::common {
namespace {

int Shown(PeerLogLimiter& limit, const std::string& peer, int calls, absl::Duration now) {
  int shown = 0;
  for (int i = 0; i < calls; ++i) shown += limit.Allow(peer, now).show;
  return shown;
}

TEST(PeerLogLimiterTest, BurstThenOneLinePerIntervalPerPeer) {
  PeerLogLimiter limit(PeerLogLimiterOptions{absl::Seconds(10), 5, 16, 100});
  EXPECT_EQ(Shown(limit, "a", 1000, absl::Seconds(1)), 5);
  // Another peer still gets its first lines in full.
  EXPECT_EQ(Shown(limit, "b", 3, absl::Seconds(2)), 3);
  EXPECT_FALSE(limit.Allow("a", absl::Seconds(10)).show);  // 9 s after a's last line
  PeerLogVerdict v = limit.Allow("a", absl::Seconds(11));
  EXPECT_TRUE(v.show);
  EXPECT_EQ(v.held, 996);
  EXPECT_EQ(Shown(limit, "a", 100, absl::Seconds(12)), 0);
}

TEST(PeerLogLimiterTest, ForgedIdsAreCappedInTableAndInLines) {
  PeerLogLimiter limit(PeerLogLimiterOptions{absl::Seconds(10), 5, 8, 20});
  int shown = 0;
  for (int i = 0; i < 1000; ++i) {
    shown += Shown(limit, absl::StrCat("forged", i), 5, absl::Milliseconds(i));
  }
  EXPECT_EQ(shown, 20);
  EXPECT_EQ(limit.peers(), 8u);
  // The next interval: held-back lines of forgotten peers are reported.
  PeerLogVerdict v = limit.Allow("forged999", absl::Seconds(11));
  EXPECT_TRUE(v.show);
  EXPECT_EQ(v.held, 5);
  EXPECT_EQ(v.forgotten, 5000 - 20 - 8 * 5);
}

// Lines of peers the table forgot, while the cap held every new line, come
// with the next sweep even when its own line is not shown.
TEST(PeerLogLimiterTest, TheSweepTellsForgottenPeersLines) {
  PeerLogLimiter limit(PeerLogLimiterOptions{absl::Seconds(10), 1, 2, 3});
  EXPECT_EQ(Shown(limit, "z", 1, absl::Seconds(0)), 1);  // the first sweep
  EXPECT_EQ(Shown(limit, "a", 3, absl::Seconds(5)), 1);  // a holds 2
  EXPECT_EQ(Shown(limit, "b", 1, absl::Seconds(5)), 1);  // z forgotten; 3 lines
  EXPECT_EQ(Shown(limit, "c", 1, absl::Seconds(5)), 0);  // a forgotten; capped
  PeerLogVerdict v = limit.Allow("b", absl::Seconds(10));  // within b's interval
  EXPECT_FALSE(v.show);
  EXPECT_EQ(v.due, (std::vector<PeerLogSummary>{{"c", 1}, {"", 2}}));
}

// Note [Paced peer logs]: a peer that floods and then goes quiet still has
// its held-back count told, by the sweep another peer's line runs.
TEST(PeerLogLimiterTest, AQuietPeersHeldCountComesWithAnotherPeersLine) {
  PeerLogLimiter limit(PeerLogLimiterOptions{absl::Seconds(10), 5, 16, 100});
  EXPECT_EQ(Shown(limit, "a", 1000, absl::Seconds(1)), 5);
  // Within a's interval: nothing is due yet.
  PeerLogVerdict v = limit.Allow("b", absl::Seconds(5));
  EXPECT_TRUE(v.show);
  EXPECT_TRUE(v.due.empty());
  v = limit.Allow("b", absl::Seconds(12));
  EXPECT_TRUE(v.show);
  EXPECT_EQ(v.due, (std::vector<PeerLogSummary>{{"a", 995}}));
  // Told once: a's next line reports nothing held.
  EXPECT_TRUE(limit.Allow("b", absl::Seconds(30)).due.empty());
  v = limit.Allow("a", absl::Seconds(31));
  EXPECT_TRUE(v.show);
  EXPECT_EQ(v.held, 0);
}

// A held line (not shown) sweeps too, at most once per interval.
TEST(PeerLogLimiterTest, TheSweepRunsOncePerIntervalOnAnyCall) {
  PeerLogLimiter limit(PeerLogLimiterOptions{absl::Seconds(10), 1, 16, 100});
  EXPECT_EQ(Shown(limit, "a", 3, absl::Seconds(0)), 1);
  EXPECT_EQ(Shown(limit, "b", 1, absl::Seconds(1)), 1);
  EXPECT_EQ(Shown(limit, "b", 1, absl::Seconds(2)), 0);  // b held, nothing due
  PeerLogVerdict v = limit.Allow("b", absl::Seconds(10.5));  // b held; a due
  EXPECT_FALSE(v.show);
  EXPECT_EQ(v.due, (std::vector<PeerLogSummary>{{"a", 2}}));
  EXPECT_TRUE(limit.Allow("b", absl::Seconds(11)).due.empty());  // b is shown itself
  // The summary was a's line of the interval: a is held again.
  EXPECT_EQ(Shown(limit, "a", 4, absl::Seconds(11)), 0);
  // The next sweep is due 10 s after the last one.
  EXPECT_TRUE(limit.Allow("c", absl::Seconds(20)).due.empty());
  EXPECT_EQ(limit.Allow("c", absl::Seconds(21)).due,
            (std::vector<PeerLogSummary>{{"a", 4}}));
}

// Summaries are lines: the cap on all peers holds them too.
TEST(PeerLogLimiterTest, SummariesStayUnderTheLineCap) {
  PeerLogLimiter limit(PeerLogLimiterOptions{absl::Seconds(10), 1, 64, 4});
  for (int i = 0; i < 4; ++i) Shown(limit, absl::StrCat("p", i), 3, absl::Seconds(0));
  PeerLogVerdict v = limit.Allow("q", absl::Seconds(10));
  EXPECT_TRUE(v.show);
  EXPECT_EQ(v.due.size(), 3u);  // 4 lines per interval: q's and 3 summaries
  EXPECT_EQ(limit.Allow("q", absl::Seconds(20)).due,
            (std::vector<PeerLogSummary>{{"p3", 2}}));
}

TEST(PeerLogLimiterTest, FlushTellsEveryPendingCountBounded) {
  PeerLogLimiter limit(PeerLogLimiterOptions{absl::Seconds(10), 1, 4, 2});
  for (int i = 0; i < 6; ++i) Shown(limit, absl::StrCat("p", i), 3, absl::Seconds(i));
  // 6 peers in a table of 4: p0 and p1 forgotten (2 held each); the cap of
  // 2 lines per interval held the later peers' first lines too.
  EXPECT_EQ(limit.Flush(), (std::vector<PeerLogSummary>{{"p2", 3}, {"p3", 3}, {"", 10}}));
  EXPECT_TRUE(limit.Flush().empty());
}

}  // namespace
}  // namespace skipswarm::common
