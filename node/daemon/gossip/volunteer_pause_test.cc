#include "node/daemon/gossip/volunteer_pause.h"

#include <string>
#include <vector>

#include "common/sim_clock.h"
#include "gtest/gtest.h"

namespace skipswarm::node {
namespace {

absl::Time At(int day, int hour, int minute) {
  return absl::FromCivil(absl::CivilMinute(2026, 12, day, hour, minute), absl::UTCTimeZone());
}

TEST(QuietHoursTest, ParsesWindowsAndRefusesNonsenseNamingTheKey) {
  auto q = QuietHours::Parse("22:00-07:00");
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->ToString(), "22:00-07:00");
  const absl::TimeZone utc = absl::UTCTimeZone();
  EXPECT_TRUE(q->Contains(At(3, 23, 30), utc));
  EXPECT_TRUE(q->Contains(At(4, 6, 59), utc));
  EXPECT_FALSE(q->Contains(At(4, 7, 0), utc));
  EXPECT_FALSE(q->Contains(At(4, 21, 59), utc));
  EXPECT_EQ(q->EndAfter(At(3, 23, 30), utc), At(4, 7, 0));
  auto day = QuietHours::Parse("09:30-17:00");
  ASSERT_TRUE(day.ok());
  EXPECT_TRUE(day->Contains(At(3, 12, 0), utc));
  EXPECT_FALSE(day->Contains(At(3, 17, 0), utc));
  for (const char* bad : {"", "22-07", "22:00", "24:00-07:00", "22:00-07:60", "7:00-9:00",
                          "22:00-22:00", "22:00-07:00-08:00", "aa:bb-cc:dd"}) {
    auto r = QuietHours::Parse(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("quiet_hours"), std::string::npos) << bad;
    }
  }
}

// Two simulated days in one-minute steps: the node pauses at 22:00 and
// resumes at 07:00; an operator's resume at 23:00 lifts that night only;
// an operator's pause holds through the morning until the operator resumes.
TEST(VolunteerPauseTest, QuietHoursAndOperatorRequestsOnTheSimulatedClock) {
  common::SimClock clock(At(3, 21, 0));
  VolunteerPause pause(*QuietHours::Parse("22:00-07:00"), absl::UTCTimeZone());
  std::vector<std::string> changes;
  bool paused = false;
  const auto poll = [&] {
    const VolunteerPause::Wanted w = pause.At(clock.Now());
    if (w.paused == paused) return;
    paused = w.paused;
    changes.push_back(absl::FormatTime("%d %H:%M ", clock.Now(), absl::UTCTimeZone()) +
                      (w.paused ? "pause (" + w.why + ")" : "resume"));
  };
  const auto run_until = [&](absl::Time t) {
    while (clock.Now() < t) {
      clock.Advance(absl::Minutes(1));
      poll();
    }
  };
  run_until(At(4, 12, 0));  // night 1 as configured
  run_until(At(4, 23, 0));
  pause.Request(false, clock.Now());  // the volunteer wants tonight's training
  poll();
  run_until(At(5, 12, 0));
  pause.Request(true, clock.Now());  // and pauses at noon
  poll();
  run_until(At(6, 8, 0));  // through the night's window and past its end
  pause.Request(false, clock.Now());
  poll();
  EXPECT_EQ(changes, (std::vector<std::string>{
                         "03 22:00 pause (quiet hours 22:00-07:00)",
                         "04 07:00 resume",
                         "04 22:00 pause (quiet hours 22:00-07:00)",
                         "04 23:00 resume",
                         "05 12:00 pause (paused by the operator)",
                         "06 08:00 resume",
                     }));
}

// Note [GPU contention]: a contention pauses while it lasts; an operator's
// resume lifts this one (not the next); an operator's pause outlasts it;
// quiet hours take over when it ends inside their window.
TEST(VolunteerPauseTest, GpuContentionPausesAndTheOperatorCanOverrideIt) {
  const absl::Time noon = At(3, 12, 0);
  VolunteerPause pause(*QuietHours::Parse("22:00-07:00"), absl::UTCTimeZone());
  EXPECT_FALSE(pause.At(noon).paused);
  pause.SetGpuContention(true, "GPU contention: pid 4242 holds 2048 MiB of this node's GPU");
  VolunteerPause::Wanted w = pause.At(noon);
  EXPECT_TRUE(w.paused);
  EXPECT_EQ(w.why, "GPU contention: pid 4242 holds 2048 MiB of this node's GPU");
  pause.Request(false, noon);  // the volunteer wants training anyway
  EXPECT_FALSE(pause.At(noon).paused);
  pause.SetGpuContention(true, "GPU contention: pid 4243 holds 1 MiB of this node's GPU");
  EXPECT_FALSE(pause.At(noon).paused);  // still the same contention
  pause.SetGpuContention(false, "");
  pause.SetGpuContention(true, "GPU contention: pid 5 holds 9 MiB of this node's GPU");
  EXPECT_TRUE(pause.At(noon).paused);  // a new one pauses again
  pause.Request(true, noon);
  EXPECT_EQ(pause.At(noon).why, "paused by the operator");
  pause.SetGpuContention(false, "");
  EXPECT_TRUE(pause.At(noon).paused);  // the operator's pause outlasts it
  pause.Request(false, noon);
  EXPECT_FALSE(pause.At(noon).paused);
  // At night the contention's reason shows first, the window's after it.
  const absl::Time night = At(3, 23, 0);
  pause.SetGpuContention(true, "GPU contention: pid 6 holds 1 MiB of this node's GPU");
  EXPECT_EQ(pause.At(night).why, "GPU contention: pid 6 holds 1 MiB of this node's GPU");
  pause.SetGpuContention(false, "");
  EXPECT_EQ(pause.At(night).why, "quiet hours 22:00-07:00");
}

}  // namespace
}  // namespace skipswarm::node
