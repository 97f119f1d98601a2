#include "node/daemon/reporting/status_page.h"

#include "third_party/cpp_httplib.h"

#include <string>

#include "absl/strings/match.h"
#include "common/sim_clock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "node/daemon/reporting/sample_status.h"

namespace skipswarm::node {
namespace {

StatusBoardOptions Options() {
  StatusBoardOptions o;
  o.node_name = "d0";
  o.mode = "gossip";
  o.num_stages = 3;
  return o;
}

// The metrics port serves the page and its JSON next to /metrics.
TEST(StatusPageTest, MetricsPortServesThePageAndItsJson) {
  common::SimClock clock;
  StatusBoard board(Options(), &clock);
  FillSampleBoard(&board, &clock);
  Metrics metrics;
  metrics.Set("skipswarm_iteration", 29);
  auto server = MetricsServer::Start(&metrics, "127.0.0.1", 0, StatusPages(&board));
  ASSERT_TRUE(server.ok()) << server.status();
  httplib::Client client("127.0.0.1", (*server)->port());

  auto page = client.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_TRUE(absl::StartsWith(page->get_header_value("Content-Type"), "text/html"));
  EXPECT_NE(page->body.find("id=\"members\""), std::string::npos);
  EXPECT_NE(page->body.find("id=\"loss-plot\""), std::string::npos);
  EXPECT_NE(page->body.find("\"name\":\"d0\""), std::string::npos);  // inlined document
  // Self-contained: no external script, style, image or font.
  for (const char* external : {"src=", "href=", "@import", "url("}) {
    EXPECT_EQ(page->body.find(external), std::string::npos) << external;
  }

  auto json = client.Get("/status.json");
  ASSERT_TRUE(json);
  EXPECT_EQ(json->status, 200);
  EXPECT_EQ(json->get_header_value("Content-Type"), "application/json");
  const nlohmann::json d = nlohmann::json::parse(json->body);
  EXPECT_EQ(d["swarm"]["members"].size(), static_cast<size_t>(kSampleMembers));
  EXPECT_EQ(d["history"].size(), static_cast<size_t>(kSampleIterations));

  auto metrics_page = client.Get("/metrics");  // unchanged
  ASSERT_TRUE(metrics_page);
  EXPECT_NE(metrics_page->body.find("skipswarm_iteration 29"), std::string::npos);
  auto missing = client.Get("/nothing");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
}

// A peer's text cannot close the page's <script> element.
TEST(StatusPageTest, InlinedDocumentCannotEndTheScriptElement) {
  const std::string page =
      RenderStatusPage(R"({"text":"</script><script>alert(1)</script><!--"})");
  EXPECT_EQ(page.find("</script><script>alert"), std::string::npos);
  EXPECT_EQ(page.find("<!--"), std::string::npos);
  EXPECT_NE(page.find(R"(\u003c/script>\u003cscript>alert(1))"), std::string::npos);
}

}  // namespace
}  // namespace skipswarm::node
