// PauseMeter on a simulated clock: one pause (two reasons in a row) of 7 s,
// a second still running when flushed.
#include "node/daemon/reporting/pause_meter.h"

#include "common/sim_clock.h"
#include "gtest/gtest.h"

namespace skipswarm::node {
namespace {

bool Has(const Metrics& m, const std::string& line) {
  return m.Render().find(line + "\n") != std::string::npos;
}

TEST(PauseMeterTest, CountsPausesAndTheirSeconds) {
  common::SimClock clock;
  Metrics metrics;
  PauseMeter pauses(&clock, &metrics);
  EXPECT_TRUE(Has(metrics, "skipswarm_training_paused 0"));
  clock.Advance(absl::Seconds(3));
  pauses.OnPauseChange(absl::UnavailableError("no live replica of stage 2"));
  clock.Advance(absl::Seconds(4));
  pauses.OnPauseChange(absl::UnavailableError("no live replica of stage 1"));  // same pause
  EXPECT_TRUE(Has(metrics, "skipswarm_training_paused 1"));
  clock.Advance(absl::Seconds(3));
  pauses.OnPauseChange(absl::OkStatus());
  EXPECT_TRUE(Has(metrics, "skipswarm_training_paused 0"));
  EXPECT_TRUE(Has(metrics, "skipswarm_training_pauses_total 1"));
  EXPECT_TRUE(Has(metrics, "skipswarm_training_paused_seconds_total 7"));
  pauses.OnPauseChange(absl::OkStatus());  // not paused: nothing
  pauses.OnPauseChange(absl::UnavailableError("again"));
  clock.Advance(absl::Seconds(2));
  pauses.Flush();
  EXPECT_TRUE(Has(metrics, "skipswarm_training_pauses_total 2"));
  EXPECT_TRUE(Has(metrics, "skipswarm_training_paused_seconds_total 9"));
}

}  // namespace
}  // namespace skipswarm::node
