#include "node/daemon/metrics.h"

#include <httplib.h>

#include "gtest/gtest.h"

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
  EXPECT_NE(text.find("skipswarm_bytes_sent_total{peer=\"ab\"} 12\n"), std::string::npos);
  auto server = MetricsServer::Start(&m, "127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status();
  httplib::Client client("127.0.0.1", (*server)->port());
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, text);
}

}  // namespace
}  // namespace skipswarm::node
