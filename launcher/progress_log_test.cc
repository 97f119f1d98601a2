#include "launcher/progress_log.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "absl/time/time.h"
#include "node/daemon/reporting/iteration_report.h"

namespace skipswarm::launcher {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

node::NodeIterationReport DataReport(uint64_t iteration, double loss) {
  node::NodeIterationReport r;
  r.iteration = iteration;
  r.data.emplace();
  r.data->iteration = iteration;
  r.data->loss = loss;
  r.data->completed = 4;
  r.data->dropped = 1;
  r.data->tokens = 512;
  r.data->elapsed = absl::Seconds(2);
  r.rerouted_here = 2;
  return r;
}

// The daemons' lines and the launcher's reader agree, whatever the node is
// called: a comma, a quote or a colon in the name used to split the
// hand-made line in the wrong place and lose the iteration.
TEST(ProgressLogTest, ReadsWhatTheDaemonsWriteWithCommasAndQuotesInNames) {
  const std::string path = TempPath("progress.jsonl");
  std::remove(path.c_str());
  node::Metrics metrics;
  node::ReportIteration("data,0 \"a\":b", DataReport(0, 4.0), 1.5, path, &metrics);
  node::ReportIteration("data, 1", DataReport(0, 2.0), 1.75, path, &metrics);
  node::ReportIteration("data,0 \"a\":b", DataReport(1, NAN), 3.0, path, &metrics);
  node::NodeIterationReport relay;
  relay.iteration = 1;
  relay.rerouted_here = 5;
  relay.stages[2].avg_bytes = 4000;  // a replica's share of a stage average
  node::ReportIteration("relay,{x}", relay, 3.0, path, &metrics);
  std::ofstream(path, std::ios::app) << "{\"node\":\"cut sh";  // a line being written

  std::map<int64_t, ProgressPoint> points;
  int64_t rerouted = 0;
  ReadProgress(path, points, rerouted);
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].n, 2);
  EXPECT_DOUBLE_EQ(points[0].loss_sum, 6.0);
  EXPECT_EQ(points[0].dropped, 2);
  EXPECT_DOUBLE_EQ(points[0].tokens, 1024);
  EXPECT_DOUBLE_EQ(points[0].elapsed, 1.75);
  EXPECT_EQ(points[1].n, 0);  // a non-finite loss is left out of the mean
  EXPECT_EQ(rerouted, 2 + 2 + 2 + 5);
  EXPECT_EQ(points[0].rerouted, 4);
  EXPECT_EQ(points[1].rerouted, 2 + 5);  // the relay's line counts too
  EXPECT_DOUBLE_EQ(points[1].avg_bytes, 4000);
  EXPECT_DOUBLE_EQ(points[0].avg_bytes, 0);
}

TEST(ProgressLogTest, LossSummaryHasAxesKillAndRerouteMarkers) {
  std::map<int64_t, ProgressPoint> points;
  for (int64_t i = 0; i < 10; ++i) {
    ProgressPoint& p = points[i];
    p.loss_sum = 5.0 - 0.2 * i;
    p.n = 1;
    p.elapsed = i;
    p.rerouted = i == 5 ? 3 : 0;
    p.dropped = i == 5 ? 1 : 0;
  }
  const std::string dir = ::testing::TempDir();
  WriteLossSummary(dir, points, {{4, "s1r1 killed"}});
  std::ifstream in(dir + "/loss.svg");
  const std::string svg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(svg.find(">iteration</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find("training loss (nats/token"), std::string::npos) << svg;
  EXPECT_NE(svg.find("<title>s1r1 killed</title>"), std::string::npos) << svg;
  EXPECT_NE(svg.find("3 hops re-routed"), std::string::npos) << svg;
  EXPECT_NE(svg.find("loss 5.000 to 3.200 over 10 iterations"), std::string::npos) << svg;
  std::ifstream csv(dir + "/loss.csv");
  std::string header;
  std::getline(csv, header);
  EXPECT_EQ(header, "iteration,loss,dropped,elapsed_s,rerouted,avg_bytes");
}

}  // namespace
}  // namespace skipswarm::launcher
