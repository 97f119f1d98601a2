#include "common/svg_plot.h"

#include <gtest/gtest.h>

namespace skipswarm::common {
namespace {

TEST(SvgPlotTest, DrawsAxesLabelsPointsAndMarkers) {
  SvgLinePlot p;
  p.title = "loss <local>";
  p.x_label = "iteration";
  p.y_label = "loss (nats/token)";
  p.points = {{0, 5.5}, {1, 4.0}, {2, 3.1}};
  p.highlighted = {1};
  p.markers.push_back({1, "s1r1 killed", "red", false});
  p.markers.push_back({2, "re-routed 3", "orange", true});
  const std::string svg = RenderSvgLinePlot(p);
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u);
  EXPECT_NE(svg.find("loss &lt;local&gt;"), std::string::npos);
  EXPECT_NE(svg.find(">iteration</text>"), std::string::npos);
  EXPECT_NE(svg.find(">loss (nats/token)</text>"), std::string::npos);
  EXPECT_NE(svg.find("<title>s1r1 killed</title>"), std::string::npos);
  EXPECT_NE(svg.find("stroke-dasharray"), std::string::npos);
  EXPECT_NE(svg.find("<circle"), std::string::npos);
  EXPECT_NE(svg.find("<polyline"), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

TEST(SvgPlotTest, EmptyAndFlatSeriesStillRender) {
  SvgLinePlot p;
  EXPECT_NE(RenderSvgLinePlot(p).find("</svg>"), std::string::npos);
  p.points = {{3, 2.0}};
  const std::string svg = RenderSvgLinePlot(p);
  EXPECT_EQ(svg.find("nan"), std::string::npos) << svg;
  EXPECT_EQ(svg.find("inf"), std::string::npos) << svg;
}

TEST(SvgPlotTest, FixedRangesPlaceThePoints) {
  SvgLinePlot p;
  p.points = {{5, 1.0}, {10, 2.0}};
  p.x_range = std::make_pair(0.0, 10.0);
  p.y_range = std::make_pair(0.0, 4.0);
  const std::string svg = RenderSvgLinePlot(p);
  // x: 64 + 716 * 5/10; y: 310 - 270 * 1/4 (left 64, right 20, top 40, bottom 50).
  EXPECT_NE(svg.find("points=\"422.00,242.50 780.00,175.00 \""), std::string::npos) << svg;
}

}  // namespace
}  // namespace skipswarm::common
