// A stage whose only replica is behind the swarm (Note [Behind the swarm]
// in node/stage/stage_server.h: a stalled member back from a SIGSTOP, its
// server at an old iteration) refuses every forward of the data node's
// iterations. No other replica can take them, so each micro-batch is
// dropped at once and its relay's abort notice reaches the origin. The data
// node must not count such iterations as finished empty ones: like a stage
// with no live replica, it must pause (Note [Paused training] in
// data_node_driver.h) until the stage serves again.
#include <glog/logging.h>

#include <atomic>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/node_id.h"
#include "gtest/gtest.h"
#include "node/compute/timed_stage_compute.h"
#include "node/train/data_source.h"
#include "node/train/test_swarm.h"
#include "node/transport/forwarding_transport.h"

namespace skipswarm::node {
namespace {

// The relay's link to `behind`, whose server is still at iteration 0:
// while `*on`, every forward of a later iteration is answered with the
// refusal that server gives (never sent).
class BehindPeerTransport final : public ForwardingTransport {
 public:
  BehindPeerTransport(std::unique_ptr<Transport> inner, common::Clock* const* clock,
                      const std::atomic<bool>* on, PeerId behind)
      : ForwardingTransport(std::move(inner)), clock_(clock), on_(on), behind_(behind) {}

  void Send(const PeerId& to, Frame frame, SendDone done) override {
    if (to == behind_ && frame.header.direction() == proto::DIRECTION_FORWARD &&
        frame.header.iteration() > 0 && on_->load()) {
      const absl::Status refusal = absl::ResourceExhaustedError(
          absl::StrCat("this node is behind (at iteration 0) (iteration ",
                       frame.header.iteration(), ")"));
      (*clock_)->RunAfter(absl::ZeroDuration(),
                          [done = std::move(done), refusal]() mutable { done(refusal); });
      return;
    }
    ForwardingTransport::Send(to, std::move(frame), std::move(done));
  }

 private:
  common::Clock* const* clock_;
  const std::atomic<bool>* on_;
  const PeerId behind_;
};

// Nodes 0 (data), 1 (stage 1), 2 (stage 2's only replica, behind from
// iteration 1 until 30 simulated seconds later). Before: the 20 iterations
// ran in well under a simulated second, every one with 0 completed and
// every micro-batch "lost_downstream". After: iteration 1 is reported
// empty, then the data node pauses at iteration 2 (Note [Refused
// iterations] in data_node_driver.h) and trains it and the rest once stage
// 2 serves again.
TEST(BehindSoleReplicaTest, TheDataNodePausesInsteadOfRunningEmptyIterations) {
  SyntheticDataSource data(2, 8, 32);
  TestSwarmOptions o;
  o.node_stages = {{0}, {1}, {2}};
  o.num_stages = 3;
  o.driver.mbs_per_iteration = 2;
  std::atomic<bool> behind{false};
  common::Clock* clock = nullptr;
  o.wrap_transport = [&](int node, std::unique_ptr<Transport> inner) -> std::unique_ptr<Transport> {
    if (node != 1) return inner;
    return std::make_unique<BehindPeerTransport>(std::move(inner), &clock, &behind,
                                                 common::NodeId::ForName("node2"));
  };
  TestSwarm swarm(o, TimedComputes(), &data);
  clock = &swarm.clock();
  ASSERT_TRUE(swarm.Run(1));
  behind = true;
  const absl::Duration start = swarm.clock().SteadyNow();
  size_t reports_midway = 99;
  absl::Status paused_midway;
  swarm.clock().RunAt(start + absl::Seconds(10), [&] {
    reports_midway = swarm.reports(0).size();
    paused_midway = swarm.driver(0)->paused();
  });
  swarm.clock().RunAt(start + absl::Seconds(30), [&behind] { behind = false; });
  const bool finished = swarm.Run(20, absl::Seconds(120));
  const absl::Duration took = swarm.clock().SteadyNow() - start;
  int empty = 0;
  for (const NodeIterationReport& r : swarm.reports(0)) {
    if (r.data.has_value() && r.data->completed == 0) ++empty;
  }
  LOG(INFO) << "20 iterations with stage 2's only replica behind for 30 s: " << empty
            << " empty, " << took << " simulated";
  ASSERT_TRUE(finished);
  EXPECT_LE(empty, 1) << "iterations ran empty while the only replica of stage 2 was behind";
  EXPECT_LE(reports_midway, 2u) << "the data node ran on through empty iterations";
  EXPECT_FALSE(paused_midway.ok()) << "the data node did not pause";
  EXPECT_GE(took, absl::Seconds(30));
}

}  // namespace
}  // namespace skipswarm::node
