#include "node/daemon/reporting/daemon_reporting.h"

#include <vector>

#include "gtest/gtest.h"

namespace skipswarm::node {
namespace {

TEST(DaemonReportingTest, ChecksPointsEveryCheckpointEveryButNotAfterTheLastIteration) {
  NodeDaemonOptions o;
  o.name = "r0";
  o.iterations = 6;
  o.checkpoint_every = 2;
  Metrics metrics;
  std::vector<uint64_t> checkpointed;
  for (uint64_t i = 0; i < 6; ++i) {
    NodeIterationReport r;
    r.iteration = i;
    PrintProgressAndCheckpoint(o, r, /*elapsed_s=*/1.0, &metrics, [&] {
      checkpointed.push_back(i);
      return absl::OkStatus();
    });
  }
  // After iterations 1 and 3 (2 and 4 done); 6 done is the end's checkpoint.
  EXPECT_EQ(checkpointed, (std::vector<uint64_t>{1, 3}));
}

TEST(DaemonReportingTest, NoCheckpointsWhenCheckpointEveryIsZero) {
  NodeDaemonOptions o;
  o.iterations = 4;
  Metrics metrics;
  int calls = 0;
  for (uint64_t i = 0; i < 4; ++i) {
    NodeIterationReport r;
    r.iteration = i;
    PrintProgressAndCheckpoint(o, r, 0.0, &metrics, [&] {
      ++calls;
      return absl::OkStatus();
    });
  }
  EXPECT_EQ(calls, 0);
}

TEST(DaemonReportingTest, NoMetricsServerForANegativePort) {
  NodeDaemonOptions o;
  o.metrics_port = -1;
  Metrics metrics;
  auto off = StartDaemonMetricsServer(o, &metrics);
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ(*off, nullptr);
}

}  // namespace
}  // namespace skipswarm::node
