// Note [Silent relay exclusion] (node/train/silent_loss_tracker.h) end to
// end: a data node and two replicas of stage 1 on a SimClock; one replica
// acks every frame and never answers (its compute hangs). The data node
// stops routing through it after two iterations, its MBs complete through
// the other replica, and it tries the silent one again when the back-off
// ends.
#include <memory>
#include <optional>
#include <vector>

#include "common/sim_clock.h"
#include "gtest/gtest.h"
#include "node/compute/timed_stage_compute.h"
#include "node/stage/stage_server.h"
#include "node/stage/swarm_view.h"
#include "node/train/data_node_driver.h"
#include "node/train/data_source.h"
#include "node/train/route_planner.h"
#include "node/transport/fault_transport.h"
#include "node/transport/inproc_transport.h"

namespace skipswarm::node {
namespace {

using common::NodeId;

class TwoReplicas {
 public:
  // `exclude_after`: SilentLossOptions::iterations_to_exclude; `mbs` per
  // iteration (InOrderPlanner: MB j goes to replica j % 2, so with one MB
  // every route passes the same replica).
  explicit TwoReplicas(int exclude_after, int mbs = 2) : board_(&clock_, Options()) {
    const std::vector<PeerInfo> members = {{data_id_, {0}, 4, "", ""},
                                           {ids_[0], {1}, 4, "", ""},
                                           {ids_[1], {1}, 4, "", ""}};
    StageServerOptions o;
    o.hop_deadline = o.min_hop_deadline = absl::Milliseconds(500);
    auto attach = [&](const NodeId& id, uint64_t seed) {
      auto t = board_.Attach(id);
      EXPECT_TRUE(t.ok());
      transports_.push_back(std::make_unique<FaultInjectingTransport>(*std::move(t), &clock_, seed));
      views_.push_back(std::make_unique<StaticSwarmView>(members));
    };
    attach(data_id_, 1);
    attach(ids_[0], 2);
    attach(ids_[1], 3);
    servers_.push_back(std::make_unique<StageServer>(
        transports_[0].get(), &clock_, views_[0].get(),
        std::map<int, StageCompute*>{{0, &data_compute_}}, o));
    for (int r = 0; r < 2; ++r) {
      servers_.push_back(std::make_unique<StageServer>(
          transports_[r + 1].get(), &clock_, views_[r + 1].get(),
          std::map<int, StageCompute*>{{1, &relay_compute_[r]}}, o));
    }
    for (auto& s : servers_) s->Attach();
    DriverOptions d;
    d.mbs_per_iteration = mbs;
    d.num_stages = 2;
    d.initial_deadline = absl::Seconds(10);
    d.min_deadline = absl::Seconds(1);
    d.deadline_factor = 4;
    d.silent_relay.iterations_to_exclude = exclude_after;
    d.silent_relay.backoff.initial = absl::Seconds(30);
    d.silent_relay.backoff.max = absl::Seconds(120);
    d.silent_relay.backoff.jitter = 0;  // exact back-offs
    // The back-off's time only: these iterations last well under it (Note
    // [Exclusion in iterations] is silent_loss_tracker_test's).
    d.silent_relay.min_iterations = 0;
    driver_ = std::make_unique<DataNodeDriver>(servers_[0].get(), &clock_, views_[0].get(),
                                               &planner_, &data_, d);
    servers_[0]->SetOriginListener(driver_.get());
  }
  ~TwoReplicas() { servers_[0]->SetOriginListener(nullptr); }

  static SwitchboardOptions Options() {
    SwitchboardOptions o;
    o.latency = absl::Milliseconds(1);
    return o;
  }

  // Replica `r` acks frames and sends nothing back (for an hour), or
  // answers again.
  void SetSilent(int r, bool silent) {
    transports_[r + 1]->SetDelay(data_id_, silent ? absl::Hours(1) : absl::ZeroDuration());
  }

  // Frames replica `r` admitted so far.
  int64_t Admitted(int r) const { return servers_[r + 1]->stats().frames_admitted; }

  // Runs `iteration` on every server until its report (at most 60 s of
  // simulated time, in 10 ms steps).
  IterationReport Run(uint64_t iteration) {
    std::optional<IterationReport> report;
    for (auto& s : servers_) s->BeginIteration(iteration);
    driver_->RunIteration(iteration, [&report](IterationReport r) { report = r; });
    const absl::Duration start = clock_.SteadyNow();
    while (!report.has_value() && clock_.SteadyNow() - start < absl::Seconds(60)) {
      clock_.Advance(absl::Milliseconds(10));
    }
    EXPECT_TRUE(report.has_value()) << "iteration " << iteration;
    return report.value_or(IterationReport{});
  }

  common::SimClock clock_;
  Switchboard board_;
  const NodeId data_id_ = NodeId::ForName("data");
  const NodeId ids_[2] = {NodeId::ForName("relay-a"), NodeId::ForName("relay-b")};
  std::vector<std::unique_ptr<StaticSwarmView>> views_;
  std::vector<std::unique_ptr<FaultInjectingTransport>> transports_;
  TimedStageCompute data_compute_{&clock_, {.stage = 0, .forward = absl::Milliseconds(10)}};
  TimedStageCompute relay_compute_[2] = {
      {&clock_, {.stage = 1, .forward = absl::Milliseconds(100)}},
      {&clock_, {.stage = 1, .forward = absl::Milliseconds(100)}}};
  InOrderPlanner planner_;
  SyntheticDataSource data_{/*samples=*/1, /*seq=*/4, /*vocab=*/16};
  std::vector<std::unique_ptr<StageServer>> servers_;
  std::unique_ptr<DataNodeDriver> driver_;
};

TEST(SilentRelayTest, DataNodeRoutesAroundAReplicaThatAcksAndHangsThenTriesItAgain) {
  TwoReplicas nodes(/*exclude_after=*/2);
  ASSERT_EQ(nodes.Run(0).completed, 2);  // warm-up: the measured deadline
  nodes.SetSilent(0, true);
  // Two iterations lose the MB routed through the silent replica at the
  // deadline; the second excludes it (30 s).
  for (uint64_t it = 1; it <= 2; ++it) {
    IterationReport r = nodes.Run(it);
    EXPECT_EQ(r.completed, 1) << "iteration " << it;
    EXPECT_EQ(r.dropped_by_reason["mb_deadline"], 1) << "iteration " << it;
    EXPECT_EQ(r.relays_excluded, it == 2 ? 1 : 0) << "iteration " << it;
  }
  // Then both MBs go through the other replica and complete (the old code
  // dropped one every iteration); five iterations take ~2.6 s.
  const absl::Duration excluded_at = nodes.clock_.SteadyNow();
  for (uint64_t it = 3; it <= 7; ++it) {
    IterationReport r = nodes.Run(it);
    EXPECT_EQ(r.completed, 2) << "iteration " << it;
    EXPECT_EQ(r.dropped, 0) << "iteration " << it;
  }
  ASSERT_LT(nodes.clock_.SteadyNow() - excluded_at, absl::Seconds(30));
  // The back-off ends: the replica is tried again, still silent, and
  // excluded again at once, for 60 s.
  nodes.clock_.Advance(excluded_at + absl::Seconds(30) - nodes.clock_.SteadyNow());
  IterationReport r = nodes.Run(8);
  EXPECT_EQ(r.completed, 1);
  EXPECT_EQ(r.dropped_by_reason["mb_deadline"], 1);
  EXPECT_EQ(r.relays_excluded, 1);
  const absl::Duration again_at = nodes.clock_.SteadyNow();
  EXPECT_EQ(nodes.Run(9).completed, 2);
  // It recovers; after the 60 s back-off both replicas carry MBs again.
  nodes.SetSilent(0, false);
  nodes.clock_.Advance(absl::Seconds(59));
  EXPECT_EQ(nodes.Run(10).completed, 2);
  nodes.clock_.Advance(again_at + absl::Seconds(61) - nodes.clock_.SteadyNow());
  const int64_t before = nodes.servers_[1]->stats().frames_admitted;
  for (uint64_t it = 11; it <= 12; ++it) {
    r = nodes.Run(it);
    EXPECT_EQ(r.completed, 2) << "iteration " << it;
    EXPECT_EQ(r.relays_excluded, 0) << "iteration " << it;
  }
  EXPECT_GE(nodes.servers_[1]->stats().frames_admitted - before, 2);  // one MB each
}

TEST(SilentRelayTest, WithoutExclusionEveryIterationLosesTheSilentReplicasMicroBatch) {
  TwoReplicas nodes(/*exclude_after=*/0);
  ASSERT_EQ(nodes.Run(0).completed, 2);
  nodes.SetSilent(0, true);
  for (uint64_t it = 1; it <= 7; ++it) {
    IterationReport r = nodes.Run(it);
    EXPECT_EQ(r.completed, 1) << "iteration " << it;
    EXPECT_EQ(r.dropped_by_reason["mb_deadline"], 1) << "iteration " << it;
  }
}

// Note [Nothing completed] (silent_loss_tracker.h): the data node sends
// its one MB per iteration through the same replica, so when that one
// hangs no MB completes and there is no route to compare with. The relay
// every lost route passes is still excluded while another replica of its
// stage exists. Before, such iterations were no evidence: every one of
// the 8 below lost its MB at the deadline.
TEST(SilentRelayTest, DataNodeWhoseEveryRoutePassesTheSilentReplicaExcludesIt) {
  TwoReplicas nodes(/*exclude_after=*/2, /*mbs=*/1);
  ASSERT_EQ(nodes.Run(0).completed, 1);
  const int used = nodes.Admitted(0) > 0 ? 0 : 1;
  ASSERT_GT(nodes.Admitted(used), 0);
  nodes.SetSilent(used, true);
  for (uint64_t it = 1; it <= 2; ++it) {
    IterationReport r = nodes.Run(it);
    EXPECT_EQ(r.completed, 0) << "iteration " << it;
    EXPECT_EQ(r.dropped_by_reason["mb_deadline"], 1) << "iteration " << it;
    EXPECT_EQ(r.relays_excluded, it == 2 ? 1 : 0) << "iteration " << it;
  }
  const int64_t before = nodes.Admitted(used);
  for (uint64_t it = 3; it <= 8; ++it) {
    IterationReport r = nodes.Run(it);
    EXPECT_EQ(r.completed, 1) << "iteration " << it;
    EXPECT_EQ(r.dropped, 0) << "iteration " << it;
  }
  EXPECT_EQ(nodes.Admitted(used), before);  // the other replica carried them
}

// ... but the last replica of a stage is never excluded for nothing: here
// the only live replica of stage 1 is silent (it might as well be slow),
// every MB is lost, and nothing could be planned around it.
TEST(SilentRelayTest, TheLastReplicaOfAStageIsNotBlamedWhenNothingCompletes) {
  TwoReplicas nodes(/*exclude_after=*/2, /*mbs=*/1);
  ASSERT_EQ(nodes.Run(0).completed, 1);
  const int used = nodes.Admitted(0) > 0 ? 0 : 1;
  nodes.views_[0]->MarkDead(nodes.ids_[1 - used]);  // the data node's view
  nodes.SetSilent(used, true);
  for (uint64_t it = 1; it <= 6; ++it) {
    IterationReport r = nodes.Run(it);
    EXPECT_EQ(r.completed, 0) << "iteration " << it;
    EXPECT_EQ(r.relays_excluded, 0) << "iteration " << it;
  }
}

}  // namespace
}  // namespace skipswarm::node
