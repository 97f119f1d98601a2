#include "node/daemon/gossip/gpu_contention.h"

#include <deque>

#include "common/sim_clock.h"
#include "gtest/gtest.h"

namespace skipswarm::node {
namespace {

constexpr int64_t kSelf = 100;
constexpr int64_t kMiB = int64_t{1} << 20;

GpuContentionOptions Options() {
  GpuContentionOptions o;
  o.pause_after = absl::Seconds(10);
  o.resume_after = absl::Seconds(30);
  o.own_pids = {kSelf};
  return o;
}

std::vector<GpuProcess> Alone() { return {{kSelf, 900 * kMiB}}; }
std::vector<GpuProcess> WithGame() { return {{kSelf, 900 * kMiB}, {4242, 2048 * kMiB}}; }
absl::Status Broken() { return absl::DeadlineExceededError("nvidia-smi did not finish within 5s"); }

// Feeds `sample` every 2 s from `*t` up to (not including) `until`.
void Feed(GpuContentionMonitor& m, const absl::StatusOr<std::vector<GpuProcess>>& sample,
          absl::Duration* t, absl::Duration until) {
  for (; *t < until; *t += absl::Seconds(2)) m.Observe(sample, *t);
}

TEST(GpuContentionMonitorTest, PausesAfterAForeignProcessHeldTheGpuLongEnough) {
  GpuContentionMonitor m(Options());
  EXPECT_EQ(m.Observe(Alone(), absl::Seconds(0)), std::nullopt);
  absl::Duration t = absl::Seconds(2);
  Feed(m, WithGame(), &t, absl::Seconds(12));  // seen at 2..10 s: 8 s
  EXPECT_FALSE(m.state().contended);
  EXPECT_EQ(m.state().foreign_bytes, 2048 * kMiB);
  const std::optional<std::string> line = m.Observe(WithGame(), t);  // 12 s: seen for 10 s
  ASSERT_TRUE(line.has_value());
  EXPECT_EQ(*line, "GPU contention: pid 4242 holds 2048 MiB of this node's GPU (seen for 10s); "
                   "pausing");
  EXPECT_TRUE(m.state().contended);
  EXPECT_EQ(m.state().why, "GPU contention: pid 4242 holds 2048 MiB of this node's GPU");
}

// Real-clock samples are a few ms off their period; the log says seconds.
TEST(GpuContentionMonitorTest, LogsWholeSeconds) {
  GpuContentionMonitor m(Options());
  m.Observe(WithGame(), absl::Milliseconds(3));
  EXPECT_EQ(m.Observe(WithGame(), absl::Milliseconds(10011)),
            "GPU contention: pid 4242 holds 2048 MiB of this node's GPU (seen for 10s); pausing");
}

TEST(GpuContentionMonitorTest, ABriefForeignProcessDoesNotPause) {
  GpuContentionMonitor m(Options());
  absl::Duration t;
  for (int round = 0; round < 5; ++round) {
    Feed(m, WithGame(), &t, t + absl::Seconds(8));  // 4 samples: 6 s
    Feed(m, Alone(), &t, t + absl::Seconds(2));
  }
  EXPECT_FALSE(m.state().contended);
}

TEST(GpuContentionMonitorTest, ResumesOnlyOnceTheGpuWasFreeForResumeAfter) {
  GpuContentionMonitor m(Options());
  absl::Duration t;
  Feed(m, WithGame(), &t, absl::Seconds(12));
  ASSERT_TRUE(m.state().contended);
  // Gone for 28 s, back once: the 30 s start again.
  Feed(m, Alone(), &t, t + absl::Seconds(30));
  Feed(m, WithGame(), &t, t + absl::Seconds(2));
  Feed(m, Alone(), &t, t + absl::Seconds(30));
  EXPECT_TRUE(m.state().contended);
  const std::optional<std::string> line = m.Observe(Alone(), t);
  ASSERT_TRUE(line.has_value());
  EXPECT_EQ(*line, "GPU contention over: no other process on this node's GPU for 30s; resuming");
  EXPECT_FALSE(m.state().contended);
  EXPECT_TRUE(m.state().why.empty());
}

TEST(GpuContentionMonitorTest, NamesSeveralHoldersLargestFirst) {
  GpuContentionOptions o = Options();
  o.pause_after = absl::ZeroDuration();
  GpuContentionMonitor m(o);
  m.Observe(std::vector<GpuProcess>{{kSelf, 1}, {7, 10 * kMiB}, {8, -1}, {9, 30 * kMiB},
                                    {10, 20 * kMiB}},
            absl::ZeroDuration());
  EXPECT_EQ(m.state().why, "GPU contention: 4 other processes use this node's GPU: pids 9 (30 "
                           "MiB), 10 (20 MiB), 7 (10 MiB), ...");
  EXPECT_EQ(m.state().foreign_bytes, 60 * kMiB);
}

// A broken or hanging lister: one warning per run of failures, no change
// of verdict, no flapping.
TEST(GpuContentionMonitorTest, FailedChecksWarnOnceAndChangeNothing) {
  GpuContentionMonitor m(Options());
  absl::Duration t;
  const std::optional<std::string> first = m.Observe(Broken(), t);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(*first,
            "cannot check for GPU contention: nvidia-smi did not finish within 5s; a failed "
            "check neither pauses nor resumes the node (a pause for contention ends after 30s "
            "of failed checks)");
  int lines = 0;
  for (t = absl::Seconds(2); t < absl::Seconds(600); t += absl::Seconds(2)) {
    lines += m.Observe(Broken(), t).has_value();
  }
  EXPECT_EQ(lines, 0);
  EXPECT_FALSE(m.state().contended);
  EXPECT_TRUE(m.state().failing);
  EXPECT_EQ(m.state().failures, 300);
  EXPECT_EQ(m.Observe(Alone(), t), "the GPU contention check works again");
  EXPECT_FALSE(m.state().failing);
}

TEST(GpuContentionMonitorTest, FailuresBetweenSightingsNeitherStartNorEndAContention) {
  GpuContentionMonitor m(Options());
  absl::Duration t;
  // Foreign, failing, foreign: the failures do not reset the 10 s.
  m.Observe(WithGame(), t);
  Feed(m, Broken(), &t, absl::Seconds(8));
  EXPECT_FALSE(m.state().contended);
  m.Observe(WithGame(), absl::Seconds(10));
  EXPECT_TRUE(m.state().contended);
  // Contended, failing for less than resume_after (alternating with free
  // samples): still contended until the free samples span 30 s.
  t = absl::Seconds(12);
  for (int i = 0; i < 7; ++i) {
    m.Observe(Alone(), t);
    m.Observe(Broken(), t + absl::Seconds(2));
    t += absl::Seconds(4);
  }
  EXPECT_TRUE(m.state().contended);  // free since 12 s, now 40 s: 28 s
  m.Observe(Alone(), absl::Seconds(42));
  EXPECT_FALSE(m.state().contended);
}

TEST(GpuContentionMonitorTest, AContentionEndsWhenTheCheckHasFailedForResumeAfter) {
  GpuContentionMonitor m(Options());
  absl::Duration t;
  Feed(m, WithGame(), &t, absl::Seconds(12));
  ASSERT_TRUE(m.state().contended);
  Feed(m, Broken(), &t, t + absl::Seconds(30));
  EXPECT_TRUE(m.state().contended);
  const std::optional<std::string> line = m.Observe(Broken(), t);  // failing for 30 s
  ASSERT_TRUE(line.has_value());
  EXPECT_NE(line->find("the GPU contention check has failed for 30s (nvidia-smi did not finish "
                       "within 5s); resuming"),
            std::string::npos)
      << *line;
  EXPECT_FALSE(m.state().contended);
  // Still failing: stays resumed. Working again with the game still there:
  // the full 10 s from the new sighting.
  Feed(m, Broken(), &t, t + absl::Seconds(100));
  EXPECT_FALSE(m.state().contended);
  const absl::Duration back = t;
  Feed(m, WithGame(), &t, back + absl::Seconds(10));
  EXPECT_FALSE(m.state().contended);
  m.Observe(WithGame(), back + absl::Seconds(10));
  EXPECT_TRUE(m.state().contended);
}

TEST(GpuContentionMonitorTest, AListWithoutThisProcessIsAFailedCheck) {
  GpuContentionMonitor m(Options());
  const std::optional<std::string> line =
      m.Observe(std::vector<GpuProcess>{{7, kMiB}}, absl::ZeroDuration());
  ASSERT_TRUE(line.has_value());
  EXPECT_NE(line->find("does not include this process, so its PIDs are from another PID "
                       "namespace"),
            std::string::npos)
      << *line;
  EXPECT_TRUE(m.state().failing);
  for (int s = 2; s < 100; s += 2) m.Observe(std::vector<GpuProcess>{{7, kMiB}}, absl::Seconds(s));
  EXPECT_FALSE(m.state().contended);
  // An empty list is fine (no process holds the GPU yet).
  EXPECT_EQ(m.Observe(std::vector<GpuProcess>{}, absl::Seconds(100)),
            "the GPU contention check works again");
  // Without expect_own, a foreign process alone counts.
  GpuContentionOptions o = Options();
  o.expect_own = false;
  o.pause_after = absl::ZeroDuration();
  GpuContentionMonitor loose(o);
  loose.Observe(std::vector<GpuProcess>{{7, kMiB}}, absl::ZeroDuration());
  EXPECT_TRUE(loose.state().contended);
}

// A scripted lister: each List() takes the next answer (the last repeats).
class ScriptedLister : public GpuProcessLister {
 public:
  explicit ScriptedLister(std::deque<absl::StatusOr<std::vector<GpuProcess>>> answers)
      : answers_(std::move(answers)) {}
  absl::StatusOr<std::vector<GpuProcess>> List() override {
    absl::StatusOr<std::vector<GpuProcess>> a = answers_.front();
    if (answers_.size() > 1) answers_.pop_front();
    return a;
  }
  std::string Describe() const override { return "scripted GPU"; }

 private:
  std::deque<absl::StatusOr<std::vector<GpuProcess>>> answers_;
};

TEST(GpuContentionWatchTest, SamplesAtOnceThenEveryPollOnTheInjectedClock) {
  common::SimClock clock;
  GpuContentionOptions o = Options();
  o.poll_every = absl::Seconds(2);
  GpuContentionWatch watch(o, std::make_unique<ScriptedLister>(
                                  std::deque<absl::StatusOr<std::vector<GpuProcess>>>{
                                      Alone(), WithGame()}),
                           &clock);
  watch.WaitForSamples(1);  // at 0 s, without the clock moving
  EXPECT_EQ(watch.state().samples, 1);
  EXPECT_EQ(watch.Describe(), "scripted GPU");
  for (int i = 2; i <= 7; ++i) {
    clock.Advance(absl::Seconds(2));
    watch.WaitForSamples(i);  // the game seen at 2, 4, ..., 12 s
  }
  EXPECT_TRUE(watch.state().contended);
  EXPECT_EQ(watch.state().samples, 7);
}

}  // namespace
}  // namespace skipswarm::node
