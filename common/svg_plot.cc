#include "common/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace skipswarm::common {
namespace {

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

std::string RenderSvgLinePlot(const SvgLinePlot& p) {
  const double w = p.width, h = p.height, left = 64, right = 20, top = 40, bottom = 50;
  double x_min = 0, x_max = 1, y_min = 0, y_max = 1;
  if (!p.points.empty()) {
    x_min = x_max = p.points[0].first;
    y_min = y_max = p.points[0].second;
    for (const auto& [x, y] : p.points) {
      x_min = std::min(x_min, x);
      x_max = std::max(x_max, x);
      if (std::isfinite(y)) {
        y_min = std::min(y_min, y);
        y_max = std::max(y_max, y);
      }
    }
  }
  for (const SvgMarker& m : p.markers) {
    x_min = std::min(x_min, m.x);
    x_max = std::max(x_max, m.x);
  }
  if (x_max <= x_min) x_max = x_min + 1;
  const double margin = std::max(1e-9, (y_max - y_min) * 0.05);
  y_min -= margin;
  y_max += margin;
  if (p.x_range && p.x_range->second > p.x_range->first) {
    std::tie(x_min, x_max) = *p.x_range;
  }
  if (p.y_range && p.y_range->second > p.y_range->first) {
    std::tie(y_min, y_max) = *p.y_range;
  }
  const auto X = [&](double x) { return left + (w - left - right) * (x - x_min) / (x_max - x_min); };
  const auto Y = [&](double y) { return h - bottom - (h - top - bottom) * (y - y_min) / (y_max - y_min); };

  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
      "<text x=\"%g\" y=\"20\" font-size=\"14\">%s</text>\n",
      w, h, left, Escape(p.title));
  absl::StrAppendFormat(&svg,
                        "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"black\"/>\n"
                        "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"black\"/>\n",
                        left, h - bottom, w - right, h - bottom, left, top, left, h - bottom);
  for (int i = 0; i <= 4; ++i) {
    const double v = y_min + (y_max - y_min) * i / 4, x = x_min + (x_max - x_min) * i / 4;
    absl::StrAppendFormat(&svg,
                          "<text x=\"%g\" y=\"%.1f\" text-anchor=\"end\">%.3g</text>\n"
                          "<line x1=\"%g\" y1=\"%.1f\" x2=\"%g\" y2=\"%.1f\" stroke=\"#ddd\"/>\n"
                          "<text x=\"%.1f\" y=\"%g\" text-anchor=\"middle\">%.4g</text>\n",
                          left - 5, Y(v) + 4, v, left + 1, Y(v), w - right, Y(v), X(x),
                          h - bottom + 15, x);
  }
  absl::StrAppendFormat(&svg,
                        "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">%s</text>\n"
                        "<text x=\"14\" y=\"%g\" transform=\"rotate(-90 14 %g)\" "
                        "text-anchor=\"middle\">%s</text>\n",
                        (left + w - right) / 2, h - 12, Escape(p.x_label),
                        (top + h - bottom) / 2, (top + h - bottom) / 2, Escape(p.y_label));
  int text_row = 0;  // staggered so that nearby labels do not overlap
  for (const SvgMarker& m : p.markers) {
    absl::StrAppendFormat(&svg,
                          "<line x1=\"%.2f\" y1=\"%g\" x2=\"%.2f\" y2=\"%g\" stroke=\"%s\" "
                          "stroke-opacity=\"0.6\"%s><title>%s</title></line>\n",
                          X(m.x), top, X(m.x), h - bottom, Escape(m.color),
                          m.dashed ? " stroke-dasharray=\"4 3\"" : "", Escape(m.label));
    if (m.text && !m.label.empty()) {
      absl::StrAppendFormat(&svg,
                            "<text x=\"%.2f\" y=\"%g\" fill=\"%s\" font-size=\"11\">%s</text>\n",
                            X(m.x) + 3, top + 10 + 12 * (text_row++ % 3), Escape(m.color),
                            Escape(m.label));
    }
  }
  std::string line;
  for (const auto& [x, y] : p.points) {
    if (std::isfinite(y)) absl::StrAppendFormat(&line, "%.2f,%.2f ", X(x), Y(y));
  }
  absl::StrAppendFormat(&svg,
                        "<polyline fill=\"none\" stroke=\"steelblue\" stroke-width=\"2\" "
                        "points=\"%s\"/>\n",
                        line);
  for (size_t i : p.highlighted) {
    if (i >= p.points.size() || !std::isfinite(p.points[i].second)) continue;
    absl::StrAppendFormat(&svg, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3\" fill=\"red\"/>\n",
                          X(p.points[i].first), Y(p.points[i].second));
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace skipswarm::common
