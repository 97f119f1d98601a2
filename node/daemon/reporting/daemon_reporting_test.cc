#include "node/daemon/reporting/daemon_reporting.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/stamp/git_commit.h"
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

TEST(DaemonReportingTest, MetricsListenTakesHostAndPortAndNamesTheFlagOnErrors) {
  NodeDaemonOptions o;
  ASSERT_TRUE(ParseMetricsListen("0.0.0.0:9464", &o).ok());
  EXPECT_EQ(o.metrics_host, "0.0.0.0");
  EXPECT_EQ(o.metrics_port, 9464);
  ASSERT_TRUE(ParseMetricsListen("[::1]:0", &o).ok());
  EXPECT_EQ(o.metrics_host, "::1");
  EXPECT_EQ(o.metrics_port, 0);
  for (const char* bad : {"9464", ":9464", "host:", "host:x", "host:70000", "host:-1"}) {
    const absl::Status s = ParseMetricsListen(bad, &o);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.message().find("--metrics_listen"), std::string::npos) << s;
  }
}

TEST(DaemonReportingTest, MetricsServerSetsBuildInfo) {
  NodeDaemonOptions o;
  o.metrics_port = 0;
  o.libtorch_version = "9.9.9";
  Metrics metrics;
  auto server = StartDaemonMetricsServer(o, &metrics);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string text = metrics.Render();
  EXPECT_NE(text.find("# TYPE skipswarm_build_info gauge\nskipswarm_build_info{version=\""),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("libtorch_version=\"9.9.9\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find(absl::StrCat("git_commit=\"", common::GitCommit(), "\"")), std::string::npos)
      << text;
}

}  // namespace
}  // namespace skipswarm::node
