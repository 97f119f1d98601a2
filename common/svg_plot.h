// SvgLinePlot: a self-contained SVG line chart with axes, tick labels, axis
// titles with units and vertical event markers (kills, joins, re-routes), in
// the look of the simulator's report (sim/report.cc). No scripts, no
// external fonts; opens in any browser.
//
//   SvgLinePlot plot;
//   plot.title = "skipswarm local: training loss";
//   plot.x_label = "iteration"; plot.y_label = "loss (nats/token)";
//   plot.points = {{0, 5.5}, {1, 5.1}};
//   plot.markers.push_back({20, "s1r1 killed", "red", false});
//   std::string svg = RenderSvgLinePlot(plot);
//
// Thread rule: plain value type and function.
#ifndef SKIPSWARM_COMMON_SVG_PLOT_H_
#define SKIPSWARM_COMMON_SVG_PLOT_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace skipswarm::common {

struct SvgMarker {
  double x = 0;        // in data units
  std::string label;   // shown at the top of the line (and as its tooltip)
  std::string color = "red";
  bool dashed = false;
  bool text = true;    // false: the label is only the tooltip (many markers)
};

struct SvgLinePlot {
  std::string title;
  std::string x_label;  // with its unit, e.g. "iteration" or "time (s)"
  std::string y_label;
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in order
  // Indices into `points` drawn as red dots (e.g. iterations that dropped).
  std::vector<size_t> highlighted;
  std::vector<SvgMarker> markers;
  // Fixed axis ranges (min, max) instead of the data's, e.g. from 0.
  std::optional<std::pair<double, double>> x_range, y_range;
  double width = 800, height = 360;
};

// The chart; axis ranges cover the points and the markers (y from its
// minimum to its maximum with a 5% margin) unless x_range / y_range fix
// them. Empty points: axes only.
std::string RenderSvgLinePlot(const SvgLinePlot& plot);

}  // namespace skipswarm::common

#endif  // SKIPSWARM_COMMON_SVG_PLOT_H_
