// Note [Paused training] (data_node_driver.h): a data node whose planner
// cannot plan does not spin through empty iterations; it re-plans with
// back-off on the simulated clock and resumes when it can.
#include <glog/logging.h>

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "node/compute/timed_stage_compute.h"
#include "node/train/data_source.h"
#include "node/train/outer_step_recorder.h"
#include "node/train/test_swarm.h"

namespace skipswarm::node {
namespace {

// Fails (UNAVAILABLE) until simulated time `until`, then plans in order.
class UnavailableUntil final : public RoutePlanner {
 public:
  // `*clock` is read at each Plan (the swarm that owns the clock is made
  // after its planners).
  UnavailableUntil(common::Clock* const* clock, absl::Duration until)
      : clock_(clock), until_(until) {}
  std::string name() const override { return "unavailable-until"; }
  absl::StatusOr<std::vector<PlannedRoute>> Plan(const PlanInput& input,
                                                 const SwarmView& view) override {
    if ((*clock_)->SteadyNow() < until_) return absl::UnavailableError("no live replica of stage 1");
    return in_order_.Plan(input, view);
  }

 private:
  common::Clock* const* const clock_;
  const absl::Duration until_;
  InOrderPlanner in_order_;
};

// Counts the plans asked of an in-order planner.
class Counting final : public RoutePlanner {
 public:
  explicit Counting(int64_t* count) : count_(count) {}
  std::string name() const override { return "counting"; }
  absl::StatusOr<std::vector<PlannedRoute>> Plan(const PlanInput& input,
                                                 const SwarmView& view) override {
    ++*count_;
    return in_order_.Plan(input, view);
  }

 private:
  int64_t* const count_;
  InOrderPlanner in_order_;
};

TEST(PausedTrainingTest, AStageWithNoLiveReplicaPausesWithBoundedAttempts) {
  SyntheticDataSource data(2, 8, 32);
  TestSwarmOptions o;
  o.node_stages = {{0}, {1}};
  o.num_stages = 2;
  o.driver.mbs_per_iteration = 2;
  int64_t attempts = 0;
  o.planner = [&attempts] { return std::make_unique<Counting>(&attempts); };
  TestSwarm swarm(o, TimedComputes(), &data);
  ASSERT_TRUE(swarm.Run(1));
  swarm.Kill(1);  // the only replica of stage 1
  attempts = 0;
  // Old code: 2,000 empty iterations at one simulated instant.
  EXPECT_FALSE(swarm.Run(2000, absl::Seconds(60)));
  EXPECT_EQ(attempts, swarm.driver(0)->plan_attempts() - 1);
  // 1 + backoff 0.1 s doubling to a 10 s cap, jitter <= 50%: about 15 in 60 s.
  EXPECT_LE(attempts, 40) << "re-planned without back-off";
  EXPECT_GE(attempts, 5);
  EXPECT_LE(swarm.reports(0).size(), 3u) << "empty iterations were run";
  LOG(INFO) << "plans asked in 60 simulated seconds with a dead stage: " << attempts;
  const absl::Status why = swarm.driver(0)->paused();
  EXPECT_TRUE(absl::IsUnavailable(why)) << why;
  EXPECT_NE(why.message().find("stage 1"), std::string::npos) << why;
  // A stop while paused ends the paused iteration at once: no more plans.
  swarm.trainer(0)->Stop();
  swarm.clock().Advance(absl::Seconds(60));
  EXPECT_EQ(swarm.driver(0)->plan_attempts() - 1, attempts);
}

TEST(PausedTrainingTest, TrainingResumesWhenThePlannerCanPlanAgain) {
  SyntheticDataSource data(2, 8, 32);
  TestSwarmOptions o;
  o.node_stages = {{0}, {1}};
  o.num_stages = 2;
  o.driver.mbs_per_iteration = 2;
  common::Clock* clock = nullptr;
  o.planner = [&clock]() -> std::unique_ptr<RoutePlanner> {
    return std::make_unique<UnavailableUntil>(&clock, absl::Seconds(30));
  };
  auto swarm = std::make_unique<TestSwarm>(o, TimedComputes(), &data);
  clock = &swarm->clock();
  ASSERT_TRUE(swarm->Run(3, absl::Seconds(120)));
  ASSERT_EQ(swarm->reports(0).size(), 3u);
  for (const NodeIterationReport& r : swarm->reports(0)) {
    ASSERT_TRUE(r.data.has_value());
    EXPECT_TRUE(r.data->status.ok()) << r.data->status;
    EXPECT_TRUE(std::isfinite(r.data->loss));
    EXPECT_EQ(r.data->completed, 2);
  }
  EXPECT_GE(swarm->clock().SteadyNow(), absl::Seconds(30));
  EXPECT_LE(swarm->driver(0)->plan_attempts(), 3 + 15);
  EXPECT_TRUE(swarm->driver(0)->paused().ok());
}

// Note [Stopping drops] (data_node_driver.h): the last replica of stage
// `stages - 1` in the views that route to it (node `stopping`; its peer
// replica, the swarm's last node, is hidden from those views, as a replica
// not yet restored) stops after iteration 0: its server refuses later
// forwards (StopAfter) before its stopping record reached the data node,
// which planned iteration 1 through it. With `stages` = 3 the refusal
// reaches the relay of stage 1, whose abort notice carries the cause to the
// origin: a relayed claim, held until the stopping record reaches the data
// node's view 1 s later (Note [Confirmed stopping] in
// data_node_driver.h). The data node pauses inside iteration 1 (nothing dropped, nothing
// counted) until the other replica appears in the views, then re-runs the
// refused micro-batches there under fresh ids: 2 of 2 completed. On the
// old code iteration 1 ended at once with 0 completed and 2 dropped.
void StoppingLastReplicaPausesUntilAReplicaReturns(int stages) {
  SyntheticDataSource data(2, 8, 32);
  TestSwarmOptions o;
  for (int s = 0; s < stages; ++s) o.node_stages.push_back({s});
  o.node_stages.push_back({stages - 1});
  o.num_stages = stages;
  o.driver.mbs_per_iteration = 2;
  std::vector<absl::Status> pauses;
  o.driver.on_pause_change = [&pauses](const absl::Status& s) { pauses.push_back(s); };
  TestSwarm swarm(o, TimedComputes(), &data);
  const int stopping = stages - 1, other = stages;
  ASSERT_TRUE(swarm.Run(1));
  for (int viewer = 0; viewer < stopping; ++viewer) swarm.SetPausedInView(viewer, other, true);
  swarm.server(stopping)->StopAfter(0);
  const absl::Duration start = swarm.clock().SteadyNow();
  // Its record is signed before its server refuses anything, and reaches
  // the others by gossip a little later.
  swarm.clock().RunAt(start + absl::Seconds(1), [&swarm, stopping] {
    for (int viewer = 0; viewer < swarm.size(); ++viewer) {
      swarm.SetStoppingInView(viewer, stopping, 0);
    }
  });
  absl::Status paused_midway;
  size_t reports_midway = 99;
  swarm.clock().RunAt(start + absl::Seconds(10), [&] {
    paused_midway = swarm.driver(0)->paused();
    reports_midway = swarm.reports(0).size();
  });
  swarm.clock().RunAt(start + absl::Seconds(20), [&swarm, stopping, other] {
    for (int viewer = 0; viewer < stopping; ++viewer) swarm.SetPausedInView(viewer, other, false);
  });
  ASSERT_TRUE(swarm.Run(1, absl::Seconds(120)));
  EXPECT_FALSE(paused_midway.ok()) << "the data node did not pause for the stopping replica";
  EXPECT_NE(paused_midway.message().find("stopping"), std::string::npos) << paused_midway;
  EXPECT_EQ(reports_midway, 1u) << "iteration 1 was reported while its micro-batches waited";
  ASSERT_EQ(swarm.reports(0).size(), 2u);
  const std::optional<IterationReport>& r = swarm.reports(0)[1].data;
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->status.ok()) << r->status;
  EXPECT_EQ(r->completed, 2);
  EXPECT_EQ(r->dropped, 0);
  EXPECT_EQ(r->rerun, 2);
  EXPECT_EQ(r->stopping_claims_unconfirmed, 0);
  EXPECT_TRUE(std::isfinite(r->loss));
  EXPECT_GE(swarm.clock().SteadyNow() - start, absl::Seconds(20));
  EXPECT_GE(swarm.server(stopping)->stats().frames_stopping, 2);
  ASSERT_EQ(pauses.size(), 2u);
  EXPECT_FALSE(pauses[0].ok());
  EXPECT_TRUE(pauses[1].ok());
  LOG(INFO) << stages << " stages: iteration 1 paused " << r->elapsed << ", " << r->rerun
            << " micro-batches re-run, " << swarm.driver(0)->plan_attempts() << " plans";
}

TEST(PausedTrainingTest, AStoppingLastReplicasRefusalPausesTheIteration) {
  StoppingLastReplicaPausesUntilAReplicaReturns(2);
}

TEST(PausedTrainingTest, AStoppingLastReplicasRefusalReachesTheOriginThroughARelay) {
  StoppingLastReplicaPausesUntilAReplicaReturns(3);
}

// A timed compute with outer steps every H = 2 (Note [Outer steps] in
// node_trainer.h); its pseudo-gradient is idle exactly when no backward
// completed since the last sync, as a real compute's parameters would be.
class OuterTimedCompute final : public OuterStepRecorder {
 public:
  OuterTimedCompute(common::Clock* clock, int stage)
      : OuterStepRecorder(std::make_unique<TimedStageCompute>(
            clock, TimedStageCompute::Options{.stage = stage,
                                              .forward = absl::Milliseconds(10)})) {}
  absl::StatusOr<UpdateStats> ApplyLocalUpdate() override {
    absl::StatusOr<UpdateStats> u = inner()->ApplyLocalUpdate();
    if (u.ok()) visits_since_sync_ += u->visits;
    return u;
  }
  absl::StatusOr<AverageContribution> TakePseudoGradient() override {
    AverageContribution c;
    c.idle = visits_since_sync_ == 0;
    c.flat.assign(8, c.idle ? 0.f : 1.f);
    c.bytes = 8 * static_cast<int64_t>(sizeof(float));
    c.digest = 7;  // the anchor's, equal on every replica here
    visits_since_sync_ = 0;
    return c;
  }

 private:
  int64_t visits_since_sync_ = 0;
};

// Note [Stopping drops] with outer steps (H = 2): a micro-batch refused by
// a stopping replica and re-run through the other one counts one visit on
// every stage it trained on, like any completed micro-batch: its first run
// was dropped before any backward, so no replica counted it, and the re-run
// is one more backward under a fresh id. The inner steps' visits equal the
// completed micro-batches, and the sync after step 2 weighs each replica
// that trained since the anchor once.
TEST(PausedTrainingTest, ARerunCountsOneVisitWithOuterSteps) {
  SyntheticDataSource data(2, 8, 32);
  TestSwarmOptions o;
  o.node_stages = {{0}, {1}, {1}};  // node 1 stops after iteration 0
  o.num_stages = 2;
  o.driver.mbs_per_iteration = 4;
  std::vector<OuterTimedCompute*> made(3, nullptr);
  TestSwarm swarm(
      o,
      [&made](int node, int stage, common::Clock* clock,
              TaskRunner*) -> std::unique_ptr<StageCompute> {
        auto c = std::make_unique<OuterTimedCompute>(clock, stage);
        made[node] = c.get();
        return c;
      },
      &data);
  ASSERT_TRUE(swarm.Run(1));
  // Its record has not reached the data node, which plans through it; the
  // other replica is out of the data node's view until 20 s later (as in
  // StoppingLastReplicaPausesUntilAReplicaReturns), so the refusal is not
  // repaired in flight but dropped with its cause, and re-run.
  swarm.SetPausedInView(0, 2, true);
  swarm.server(1)->StopAfter(0);
  swarm.clock().RunAt(swarm.clock().SteadyNow() + absl::Seconds(20),
                      [&swarm] { swarm.SetPausedInView(0, 2, false); });
  ASSERT_TRUE(swarm.Run(1, absl::Seconds(120)));
  ASSERT_EQ(swarm.reports(0).size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const std::optional<IterationReport>& r = swarm.reports(0)[i].data;
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->completed, 4) << "iteration " << i;
    EXPECT_EQ(r->dropped, 0) << "iteration " << i;
    EXPECT_EQ(swarm.reports(0)[i].stages.at(0).visits_here, r->completed) << "iteration " << i;
    int64_t stage1 = 0;
    for (int node : {1, 2}) {
      ASSERT_EQ(swarm.reports(node).size(), 2u);
      stage1 += swarm.reports(node)[i].stages.at(1).visits_here;
    }
    EXPECT_EQ(stage1, r->completed) << "iteration " << i;
  }
  EXPECT_GT(swarm.reports(0)[1].data->rerun, 0) << "no micro-batch was planned through node 1";
  EXPECT_EQ(swarm.reports(1)[1].stages.at(1).visits_here, 0);
  EXPECT_EQ(swarm.reports(2)[1].stages.at(1).visits_here, 4);
  // The sync after step 2, over the stage-1 replicas that trained since
  // the anchor (node 2 did in iteration 1; node 1 if iteration 0 used it).
  const int trained = 1 + (swarm.reports(1)[0].stages.at(1).visits_here > 0 ? 1 : 0);
  for (int node : {1, 2}) {
    ASSERT_EQ(made[node]->outer_steps.size(), 1u) << "node " << node;
    EXPECT_FLOAT_EQ(made[node]->outer_steps[0].first, trained) << "node " << node;
    EXPECT_EQ(made[node]->outer_steps[0].second, trained) << "node " << node;
  }
}

}  // namespace
}  // namespace skipswarm::node
