// The status page in a real browser: Debian's chromium, headless, opens
// the page a metrics server serves for a sample swarm (sample_status.h),
// runs its JavaScript, and the test checks the DOM it built (member rows,
// the stage map, a loss plot with one point per iteration and event
// markers) and saves a screenshot (the README's). Skipped, saying why,
// where chromium is not installed (tools/setup.sh installs it).
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/sim_clock.h"
#include "gtest/gtest.h"
#include "node/daemon/reporting/sample_status.h"
#include "node/daemon/reporting/status_page.h"

namespace skipswarm::node {
namespace {

std::string FindChromium() {
  for (const char* path : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return "";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The text of the element that starts at `open` (e.g. `<table id="members"`)
// up to the first `close` after it; empty when absent.
std::string Element(const std::string& dom, const std::string& open, const std::string& close) {
  const size_t a = dom.find(open);
  if (a == std::string::npos) return "";
  const size_t b = dom.find(close, a);
  return dom.substr(a, b == std::string::npos ? std::string::npos : b - a);
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

std::string OutputDir() {
  for (const char* var : {"TEST_UNDECLARED_OUTPUTS_DIR", "TEST_TMPDIR"}) {
    if (const char* v = std::getenv(var)) return v;
  }
  return "/tmp";
}

TEST(StatusPageBrowserTest, ChromiumRendersMembersStagesAndPlots) {
  const std::string chromium = FindChromium();
  if (chromium.empty()) GTEST_SKIP() << "no chromium (Debian package chromium; tools/setup.sh)";
  common::SimClock clock;
  StatusBoardOptions o;
  o.node_name = "d0";
  o.mode = "gossip";
  o.num_stages = 3;
  o.version = "test";
  StatusBoard board(o, &clock);
  FillSampleBoard(&board, &clock);
  Metrics metrics;
  ServingHealth health("d0", [](bool) {}, &metrics);
  board.SetHealth(&health);
  auto server = MetricsServer::Start(&metrics, "127.0.0.1", 0, StatusPages(&board));
  ASSERT_TRUE(server.ok()) << server.status();

  const std::string out = OutputDir();
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string profile = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/chromium-profile");
  const std::string url = absl::StrCat("http://127.0.0.1:", (*server)->port(), "/");
  // Root in a container needs --no-sandbox; a profile of its own keeps the
  // run independent of $HOME.
  const std::string common_flags =
      absl::StrCat("timeout 90 ", chromium, " --headless --no-sandbox --disable-gpu",
                   " --no-first-run --user-data-dir=", profile,
                   " --window-size=1280,1400");
  const std::string dom_file = out + "/status-page.dom.html";
  ASSERT_EQ(std::system(absl::StrCat(common_flags, " --dump-dom ", url, " > ", dom_file,
                                     " 2> ", out, "/chromium.log")
                            .c_str()),
            0)
      << ReadFile(out + "/chromium.log");
  const std::string dom = ReadFile(dom_file);

  // Members: one row per member of the view (plus the header row).
  const std::string members = Element(dom, "<table id=\"members\"", "</table>");
  EXPECT_EQ(Count(members, "<tr"), kSampleMembers + 1) << members;
  EXPECT_EQ(Count(members, "outbound-only"), 1);
  EXPECT_NE(members.find("(this node)"), std::string::npos);
  // Stage map: three stages.
  const std::string stages = Element(dom, "<table id=\"stage-map\"", "</table>");
  EXPECT_EQ(Count(stages, "<tr"), 3 + 1) << stages;
  // Health badge, rendered by the script (the served page says "…").
  const std::string badge = Element(dom, "<span id=\"health\"", "</span>");
  EXPECT_NE(badge.find(">SERVING"), std::string::npos) << badge;
  // The loss plot: one point per iteration, markers for the re-route and
  // the death.
  const std::string loss = Element(dom, "<svg id=\"loss-plot\"", "</svg>");
  const std::string series = Element(loss, "class=\"series\"", "/>");
  const size_t points_at = series.find("points=\"");
  ASSERT_NE(points_at, std::string::npos) << loss;
  const std::string points =
      series.substr(points_at + 8, series.find('"', points_at + 8) - points_at - 8);
  EXPECT_EQ(std::vector<std::string>(absl::StrSplit(points, ' ')).size(),
            static_cast<size_t>(kSampleIterations));
  EXPECT_EQ(Count(loss, "class=\"marker\""), 2) << loss;
  EXPECT_NE(loss.find(">iteration<"), std::string::npos);  // axis label
  const std::string tput = Element(dom, "<svg id=\"throughput-plot\"", "</svg>");
  EXPECT_NE(tput.find("class=\"series\""), std::string::npos);
  EXPECT_EQ(Count(Element(dom, "<ul id=\"events\"", "</ul>"), "<li"), 3);

  const std::string png = out + "/status-page.png";
  ASSERT_EQ(std::system(absl::StrCat(common_flags, " --hide-scrollbars --screenshot=", png, " ",
                                     url, " 2>> ", out, "/chromium.log")
                            .c_str()),
            0)
      << ReadFile(out + "/chromium.log");
  const std::string image = ReadFile(png);
  ASSERT_GT(image.size(), 8u);
  EXPECT_EQ(image.substr(1, 3), "PNG");
}

}  // namespace
}  // namespace skipswarm::node
