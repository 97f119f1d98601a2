// deploy/grafana/skipswarm-dashboard.json is built on the daemon's real
// metric names: every metric a panel's PromQL names is in MetricCatalog()
// (histogram series by their family) or is a process metric the server
// renders; and, where Debian's promtool is installed, every query parses
// (each becomes a recording rule for `promtool check rules`).
#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "node/daemon/reporting/metrics.h"

namespace skipswarm::node {
namespace {

constexpr char kDashboard[] = "deploy/grafana/skipswarm-dashboard.json";

nlohmann::json LoadDashboard() {
  std::ifstream in(kDashboard);
  EXPECT_TRUE(in.good()) << kDashboard;
  return nlohmann::json::parse(in);
}

// Every "expr" anywhere in the document, with the panel title it is in.
void CollectExprs(const nlohmann::json& j, const std::string& title,
                  std::vector<std::pair<std::string, std::string>>* out) {
  if (j.is_object()) {
    const std::string here = j.contains("title") && j["title"].is_string()
                                 ? j["title"].get<std::string>()
                                 : title;
    for (const auto& [key, value] : j.items()) {
      if (key == "expr" && value.is_string()) {
        out->push_back({here, value.get<std::string>()});
      } else {
        CollectExprs(value, here, out);
      }
    }
  } else if (j.is_array()) {
    for (const auto& v : j) CollectExprs(v, title, out);
  }
}

std::set<std::string> KnownSeries() {
  std::set<std::string> known;
  for (const MetricFamily& f : MetricCatalog()) {
    known.insert(f.name);
    if (f.type == MetricType::kHistogram) {
      for (const char* suffix : {"_bucket", "_sum", "_count"}) known.insert(f.name + std::string(suffix));
    }
  }
  // The process families, as this process's scrape renders them.
  std::istringstream process(RenderProcessMetrics());
  std::string line;
  while (std::getline(process, line)) {
    absl::string_view rest = line;
    if (absl::ConsumePrefix(&rest, "# TYPE ")) {
      known.insert(std::string(rest.substr(0, rest.find(' '))));
    }
  }
  return known;
}

TEST(GrafanaDashboardTest, EveryQueryNamesARealMetric) {
  const nlohmann::json dash = LoadDashboard();
  std::vector<std::pair<std::string, std::string>> exprs;
  CollectExprs(dash, "", &exprs);
  ASSERT_GE(exprs.size(), 20u);
  const std::set<std::string> known = KnownSeries();
  ASSERT_TRUE(known.count("process_resident_memory_bytes")) << "no process metrics rendered";
  const std::regex metric(R"(\b((skipswarm|process)_[a-z0-9_]+))");
  std::set<std::string> used;
  for (const auto& [title, expr] : exprs) {
    int names = 0;
    for (std::sregex_iterator it(expr.begin(), expr.end(), metric), end; it != end; ++it) {
      const std::string name = (*it)[1];
      ++names;
      used.insert(name);
      EXPECT_TRUE(known.count(name)) << "panel '" << title << "': " << name
                                     << " is not a metric the daemon exports (" << expr << ")";
    }
    EXPECT_GT(names, 0) << "panel '" << title << "' names no metric: " << expr;
    // Counters are read as rates, never as raw values.
    for (const MetricFamily& f : MetricCatalog()) {
      if (f.type != MetricType::kCounter || !absl::StrContains(expr, f.name)) continue;
      EXPECT_TRUE(absl::StrContains(expr, "rate(") || absl::StrContains(expr, "increase("))
          << "panel '" << title << "' shows counter " << f.name << " raw: " << expr;
    }
  }
  // The board covers the families an operator needs first.
  for (const char* must : {"skipswarm_loss", "skipswarm_tokens_trained_total", "skipswarm_serving",
                           "skipswarm_live_members", "skipswarm_reachable",
                           "skipswarm_hop_latency_seconds_bucket", "skipswarm_build_info"}) {
    EXPECT_TRUE(used.count(must)) << must << " has no panel";
  }
}

TEST(GrafanaDashboardTest, PanelsHaveUniqueIdsAndUseTheDatasourceVariable) {
  const nlohmann::json dash = LoadDashboard();
  EXPECT_EQ(dash["uid"], "skipswarm-node");
  std::set<int> ids;
  for (const auto& p : dash["panels"]) {
    EXPECT_TRUE(ids.insert(p["id"].get<int>()).second) << "duplicate id " << p["id"];
    ASSERT_TRUE(p.contains("gridPos")) << p["title"];
    if (p["type"] == "row") continue;
    EXPECT_EQ(p["datasource"]["uid"], "${datasource}") << p["title"];
  }
}

TEST(GrafanaDashboardTest, PromtoolParsesEveryQuery) {
  if (std::system("command -v promtool > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "no promtool (Debian package prometheus; tools/check_metrics.sh)";
  }
  const nlohmann::json dash = LoadDashboard();
  std::vector<std::pair<std::string, std::string>> exprs;
  CollectExprs(dash, "", &exprs);
  nlohmann::json rules = nlohmann::json::array();
  int n = 0;
  for (const auto& [title, expr] : exprs) {
    // Grafana's variables become what they expand to.
    const std::string promql = absl::StrReplaceAll(expr, {{"$instance", ".*"}});
    rules.push_back({{"record", absl::StrCat("skipswarm:dashboard_query_", n++)},
                     {"expr", promql}});
  }
  const nlohmann::json file = {{"groups", {{{"name", "dashboard"}, {"rules", rules}}}}};
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/dashboard-rules.yml");
  std::ofstream(path) << file.dump(2);  // JSON is YAML
  const std::string log = path + ".log";
  const int rc = std::system(absl::StrCat("promtool check rules ", path, " > ", log, " 2>&1").c_str());
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(rc, 0) << text.str();
}

}  // namespace
}  // namespace skipswarm::node
