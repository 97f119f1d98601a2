#include "node/daemon/reporting/metrics.h"

#include "third_party/cpp_httplib.h"

#include <set>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "node/transport/frame_validator.h"
#include "node/transport/relay/relay_service.h"
#include "node/transport/test_util.h"

namespace skipswarm::node {
namespace {

TEST(MetricsTest, RendersTextFormatAndServesIt) {
  Metrics m;
  m.Set("skipswarm_iteration", 12);
  m.Add("skipswarm_bytes_sent_total", 5, "peer=\"ab\"");
  m.Add("skipswarm_bytes_sent_total", 7, "peer=\"ab\"");
  const std::string text = m.Render();
  EXPECT_NE(text.find("# TYPE skipswarm_iteration gauge\nskipswarm_iteration 12\n"),
            std::string::npos);
  EXPECT_NE(text.find("# HELP skipswarm_iteration The last training iteration"),
            std::string::npos);
  EXPECT_NE(text.find("skipswarm_bytes_sent_total{peer=\"ab\"} 12\n"), std::string::npos);
  auto server = MetricsServer::Start(&m, "127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status();
  httplib::Client client("127.0.0.1", (*server)->port());
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  // The scrape adds the process's own metrics after the registry's.
  EXPECT_EQ(res->body.substr(0, text.size()), text);
  for (const char* family :
       {"process_resident_memory_bytes", "process_cpu_seconds_total", "process_start_time_seconds",
        "process_open_fds", "process_max_fds", "process_virtual_memory_bytes"}) {
    EXPECT_NE(res->body.find(std::string("# TYPE ") + family), std::string::npos) << family;
  }
}

// A daemon whose start-up fails right after the metrics server started
// destroys it at once: httplib's stop() used to be a no-op before the listen
// loop began, and the destructor's join never returned (the test timed out).
TEST(MetricsTest, ServerDestroyedRightAfterStartShutsDown) {
  Metrics m;
  for (int i = 0; i < 50; ++i) {
    auto server = MetricsServer::Start(&m, "127.0.0.1", 0);
    ASSERT_TRUE(server.ok()) << server.status();
  }
}

// Ports are exclusive (no SO_REUSEPORT): a second server on the same port
// fails with an error naming the flag instead of sharing the scrapes.
TEST(MetricsTest, ASecondServerOnTheSamePortFailsNamingTheFlag) {
  Metrics m;
  auto first = MetricsServer::Start(&m, "127.0.0.1", 0);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = MetricsServer::Start(&m, "127.0.0.1", (*first)->port());
  ASSERT_FALSE(second.ok()) << "two servers bound port " << (*first)->port();
  EXPECT_NE(second.status().message().find("--metrics_port"), std::string::npos)
      << second.status();
}

TEST(MetricsTest, RendersHistogramsAndCounters) {
  Metrics m;
  m.SetHistogram("skipswarm_hop_latency_seconds", {{0.01, 0.1}, {2, 3}, 4, 1.25});
  m.Set("skipswarm_x_total", 3, "peer=\"ab\"");
  const std::string text = m.Render();
  EXPECT_NE(text.find("# TYPE skipswarm_x_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE skipswarm_hop_latency_seconds histogram\n"
                      "skipswarm_hop_latency_seconds_bucket{le=\"0.01\"} 2\n"
                      "skipswarm_hop_latency_seconds_bucket{le=\"0.1\"} 3\n"
                      "skipswarm_hop_latency_seconds_bucket{le=\"+Inf\"} 4\n"
                      "skipswarm_hop_latency_seconds_sum 1.25\n"
                      "skipswarm_hop_latency_seconds_count 4\n"),
            std::string::npos)
      << text;
}

TEST(MetricsTest, ExportsPerPeerTrafficAndReasons) {
  StageServerStats s;
  const common::NodeId peer = common::NodeId::ForName("p");
  s.traffic[peer] = {100, 40, 2, 1};
  s.rerouted_by_reason["deadline"] = 3;
  s.dropped_by_reason["next_hop_died"] = 2;
  s.hop_latency = {{0.5}, {1}, 1, 0.2};
  Metrics m;
  ExportServerStats(s, &m);
  IterationReport r;
  r.dropped_by_reason["mb_deadline"] = 1;
  r.relays_excluded = 1;
  r.stopping_claims_unconfirmed = 2;
  ExportDrops(r, &m);
  ExportDrops(r, &m);
  const std::string text = m.Render();
  EXPECT_NE(text.find("skipswarm_relay_exclusions_total 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("skipswarm_stopping_claims_unconfirmed_total 4\n"), std::string::npos)
      << text;
  const std::string label = "{peer=\"" + peer.ShortString() + "\"}";
  EXPECT_NE(text.find("skipswarm_peer_bytes_sent_total" + label + " 100\n"), std::string::npos);
  EXPECT_NE(text.find("skipswarm_peer_bytes_received_total" + label + " 40\n"),
            std::string::npos);
  EXPECT_NE(text.find("skipswarm_micro_batches_rerouted_total{reason=\"deadline\"} 3"),
            std::string::npos);
  EXPECT_NE(text.find("skipswarm_micro_batch_visits_dropped_total{reason=\"next_hop_"
                      "died\"} 2"),
            std::string::npos);
  EXPECT_NE(text.find("skipswarm_micro_batches_dropped_total{reason=\"mb_deadline\"} 2"),
            std::string::npos);
  EXPECT_EQ(text.find("by_reason"), std::string::npos) << "a reason is a label, not a name";
  EXPECT_NE(text.find("skipswarm_hop_latency_seconds_count 1\n"), std::string::npos);
  EXPECT_EQ(text.find("skipswarm_first_reroute_seconds"), std::string::npos);
}

// A frame the validator refuses is counted under its reason; every other
// reason of the fixed set is exported at zero.
TEST(MetricsTest, ExportsRefusedFramesByReason) {
  const PeerId self = PeerId::ForName("self");
  const PeerId sender = PeerId::ForName("sender");
  FrameValidator validator({self, "swarm-a"});
  Frame frame = testutil::MakeTestFrame({sender, self, sender}, 1, 10);
  frame.header.set_swarm_id("swarm-b");
  const absl::Status why = validator.CheckHeader(frame.header);
  ASSERT_EQ(why.code(), absl::StatusCode::kPermissionDenied) << why;
  validator.LogRejected(sender, frame.header, why);
  validator.LogRejected(sender, frame.header, absl::ResourceExhaustedError("quota"),
                        /*by_quota=*/true);
  Metrics m;
  ExportFramesRefused(validator.rejected_by_reason(), &m);
  const std::string text = m.Render();
  const std::string name = "skipswarm_transport_frames_refused_total";
  EXPECT_TRUE(absl::StrContains(text, name + "{reason=\"swarm\"} 1\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, name + "{reason=\"quota\"} 1\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, name + "{reason=\"version\"} 0\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "# TYPE " + name + " counter")) << text;
  EXPECT_FALSE(absl::StrContains(text, "Not in skipswarm's metric catalog")) << text;
}

TEST(MetricsTest, RelayStatsAreExportedWithEachRefusalReason) {
  RelayServiceStats stats;
  stats.attached = 2;
  stats.bytes_relayed = 4096;
  stats.over_budget = 3;
  Metrics m;
  ExportRelayStats(stats, &m);
  const std::string text = m.Render();
  EXPECT_TRUE(absl::StrContains(text, "skipswarm_relay_attached_nodes 2\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "skipswarm_relayed_bytes_total 4096\n")) << text;
  const std::string name = "skipswarm_relay_refused_total";
  EXPECT_TRUE(absl::StrContains(text, name + "{reason=\"over_budget\"} 3\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, name + "{reason=\"oversized\"} 0\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "# TYPE " + name + " counter")) << text;
  EXPECT_FALSE(absl::StrContains(text, "Not in skipswarm's metric catalog")) << text;
}

// Every family the daemons write is in the catalog, and the catalog follows
// Prometheus' conventions (what `promtool check metrics` lints): counters
// and only counters end in _total; no rate or non-base-unit names.
TEST(MetricsTest, CatalogFollowsPrometheusConventions) {
  std::set<std::string> names;
  for (const MetricFamily& f : MetricCatalog()) {
    const std::string name = f.name;
    EXPECT_TRUE(names.insert(name).second) << "listed twice: " << name;
    EXPECT_GT(std::string(f.help).size(), 10u) << name;
    EXPECT_EQ(f.type == MetricType::kCounter, absl::EndsWith(name, "_total")) << name;
    for (const char* bad : {"_per_second", "_by_", "milliseconds", "_ms", "_kb", "_mb"}) {
      EXPECT_EQ(name.find(bad), std::string::npos) << name;
    }
  }
  // What one data node's iteration and its server stats write.
  StageServerStats s;
  s.traffic[common::NodeId::ForName("p")] = {1, 1, 1, 1};
  s.rerouted_by_reason["deadline"] = 1;
  s.dropped_by_reason["mb_deadline"] = 1;
  s.first_reroute_at = absl::Seconds(1);
  Metrics m;
  ExportServerStats(s, &m);
  IterationReport r;
  r.dropped_by_reason["mb_deadline"] = 1;
  ExportDrops(r, &m);
  const std::string text = m.Render();
  EXPECT_EQ(text.find("Not in skipswarm's metric catalog"), std::string::npos) << text;
}

// Process metrics come from /proc/self; the values are this test's own.
TEST(MetricsTest, ProcessMetricsAreThisProcesssOwn) {
  const std::string text = RenderProcessMetrics();
  EXPECT_NE(text.find("# HELP process_cpu_seconds_total "), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE process_cpu_seconds_total counter\n"), std::string::npos) << text;
  const size_t at = text.find("\nprocess_resident_memory_bytes ");
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_GT(std::stod(text.substr(at + 31)), 1e6) << text;  // a gtest binary holds > 1 MB
  const size_t start = text.find("\nprocess_start_time_seconds ");
  ASSERT_NE(start, std::string::npos) << text;
  EXPECT_GT(std::stod(text.substr(start + 28)), 1.5e9) << text;  // after 2017
}

}  // namespace
}  // namespace skipswarm::node
