#include "node/daemon/reporting/serving_health.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace skipswarm::node {
namespace {

NodeIterationReport DataReport(uint64_t iteration, double loss, int completed = 4) {
  NodeIterationReport r;
  r.iteration = iteration;
  r.data.emplace();
  r.data->loss = loss;
  r.data->completed = completed;
  return r;
}

// A data node whose loss went NaN kept answering SERVING; now its health
// says NOT_SERVING with the reason until a finite loss comes back, and the
// pause cause and the divergence cause clear independently.
TEST(ServingHealthTest, NonFiniteLossAndPauseMakeItNotServingWithReasons) {
  Metrics metrics;
  std::vector<bool> calls;
  ServingHealth health("n1", [&calls](bool s) { calls.push_back(s); }, &metrics);
  EXPECT_TRUE(health.serving());
  health.ObserveIteration(DataReport(3, 2.5));
  EXPECT_TRUE(calls.empty());  // no change, no call

  health.ObserveIteration(DataReport(4, NAN));
  EXPECT_FALSE(health.serving());
  EXPECT_EQ(calls, std::vector<bool>({false}));
  EXPECT_NE(health.Reasons().find("diverged: loss nan at iteration 4"), std::string::npos)
      << health.Reasons();
  EXPECT_NE(metrics.Render().find("skipswarm_serving 0\n"), std::string::npos);
  EXPECT_NE(metrics.Render().find("skipswarm_health_cause{cause=\"diverged\"} 1\n"),
            std::string::npos);

  health.Set("paused", absl::UnavailableError("stage 2 has no live replica"));
  health.ObserveIteration(DataReport(5, 2.0));  // diverged clears, paused holds
  EXPECT_FALSE(health.serving());
  EXPECT_EQ(health.Reasons(), "paused: stage 2 has no live replica");
  health.Set("paused", absl::OkStatus());
  EXPECT_TRUE(health.serving());
  EXPECT_EQ(calls.back(), true);
  EXPECT_NE(metrics.Render().find("skipswarm_serving 1\n"), std::string::npos);

  NodeIterationReport relay;  // a relay has no loss: nothing changes
  health.ObserveIteration(relay);
  EXPECT_TRUE(health.serving());
}

// A gossip node with no live peer says so instead of SERVING.
TEST(ServingHealthTest, NoLivePeerIsIsolated) {
  Metrics metrics;
  std::vector<bool> calls;
  ServingHealth health("n1", [&calls](bool s) { calls.push_back(s); }, &metrics);
  health.ObservePeers(0);
  EXPECT_FALSE(health.serving());
  EXPECT_EQ(health.Reasons(), "isolated: no live peer in this node's gossip view");
  EXPECT_NE(metrics.Render().find("skipswarm_health_cause{cause=\"isolated\"} 1\n"),
            std::string::npos);
  health.ObservePeers(2);
  EXPECT_TRUE(health.serving());
  EXPECT_EQ(calls, std::vector<bool>({false, true}));
}

// An iteration whose micro-batches were all dropped (a replica killed
// mid-iteration) reports loss NaN because nothing finished: that is not
// divergence, and flipping to NOT_SERVING on it made a healthy node look
// diverged after every kill.
TEST(ServingHealthTest, AnIterationWithNoFinishedMicroBatchIsNotDivergence) {
  Metrics metrics;
  std::vector<bool> calls;
  ServingHealth health("n1", [&calls](bool s) { calls.push_back(s); }, &metrics);
  health.ObserveIteration(DataReport(7, NAN, /*completed=*/0));
  EXPECT_TRUE(health.serving());
  EXPECT_TRUE(calls.empty());
  // A real divergence is not cleared by such an iteration either.
  health.ObserveIteration(DataReport(8, INFINITY));
  health.ObserveIteration(DataReport(9, NAN, /*completed=*/0));
  EXPECT_FALSE(health.serving());
  EXPECT_NE(health.Reasons().find("diverged: loss inf at iteration 8"), std::string::npos)
      << health.Reasons();
}

}  // namespace
}  // namespace skipswarm::node
