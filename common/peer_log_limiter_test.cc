#include "common/peer_log_limiter.h"

#include <string>

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

}  // namespace
}  // namespace skipswarm::common
