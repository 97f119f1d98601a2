#include "launcher/progress_log.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/svg_plot.h"

#include "nlohmann/json.hpp"

namespace skipswarm::launcher {

void ReadProgress(const std::string& path, std::map<int64_t, ProgressPoint>& points,
                  int64_t& rerouted) {
  std::ifstream in(path);
  std::string line;
  points.clear();
  rerouted = 0;
  std::map<int64_t, int64_t> rerouted_at;  // relays' lines too, hence kept apart
  std::map<int64_t, double> avg_bytes_at;  // likewise
  while (std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) continue;
    const auto number = [&j](const char* key, double fallback) {
      const auto it = j.find(key);
      return it != j.end() && it->is_number() ? it->get<double>() : fallback;
    };
    rerouted += static_cast<int64_t>(number("rerouted_here", 0));
    const auto it = j.find("iteration");
    if (it != j.end() && it->is_number_integer()) {
      rerouted_at[it->get<int64_t>()] += static_cast<int64_t>(number("rerouted_here", 0));
      avg_bytes_at[it->get<int64_t>()] += number("avg_bytes", 0);
    }
    const auto loss = j.find("loss");
    if (it == j.end() || !it->is_number_integer() || loss == j.end() || !loss->is_number()) {
      continue;
    }
    ProgressPoint& pt = points[it->get<int64_t>()];
    if (loss->get<double>() >= 0) {
      pt.loss_sum += loss->get<double>();
      ++pt.n;
    }
    pt.completed += static_cast<int>(number("completed", 0));
    pt.dropped += static_cast<int>(number("dropped", 0));
    pt.tokens += number("tokens", 0);
    pt.elapsed = std::max(pt.elapsed, number("elapsed_s", 0));
  }
  for (auto& [it, pt] : points) {
    auto r = rerouted_at.find(it);
    if (r != rerouted_at.end()) pt.rerouted = r->second;
    auto b = avg_bytes_at.find(it);
    if (b != avg_bytes_at.end()) pt.avg_bytes = b->second;
  }
}

std::map<std::string, NodeFrames> ReadNodeFrames(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::map<std::string, NodeFrames> out;
  while (std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) continue;
    const auto node = j.find("node");
    const auto sent = j.find("frames_sent");
    const auto received = j.find("frames_received");
    if (node == j.end() || !node->is_string() || sent == j.end() || !sent->is_number_integer() ||
        received == j.end() || !received->is_number_integer()) {
      continue;
    }
    NodeFrames& f = out[node->get<std::string>()];
    f.sent = std::max(f.sent, sent->get<int64_t>());
    f.received = std::max(f.received, received->get<int64_t>());
  }
  return out;
}

void WriteLossSummary(const std::string& dir, const std::map<int64_t, ProgressPoint>& points,
                      const std::vector<RunEvent>& events) {
  std::ofstream csv(dir + "/loss.csv");
  csv << "iteration,loss,dropped,elapsed_s,rerouted,avg_bytes\n";
  common::SvgLinePlot plot;
  plot.x_label = "iteration";
  plot.y_label = "training loss (nats/token, mean of the data nodes)";
  double first = NAN, last = NAN;
  double wall_s = 0;
  bool any_rerouted = false;
  for (const auto& [it, p] : points) {
    if (p.n == 0) continue;
    const double loss = p.loss_sum / p.n;
    csv << it << "," << loss << "," << p.dropped << "," << p.elapsed << "," << p.rerouted << ","
        << p.avg_bytes << "\n";
    if (p.dropped > 0) plot.highlighted.push_back(plot.points.size());
    plot.points.emplace_back(static_cast<double>(it), loss);
    if (std::isnan(first)) first = loss;
    last = loss;
    wall_s = std::max(wall_s, p.elapsed);
    if (p.rerouted > 0) {
      common::SvgMarker m;
      m.x = static_cast<double>(it);
      m.label = absl::StrCat(p.rerouted, " hops re-routed");
      m.color = "orange";
      m.dashed = true;
      m.text = !any_rerouted;  // the first one's label; the rest as tooltips
      any_rerouted = true;
      plot.markers.push_back(m);
    }
  }
  if (plot.points.empty()) return;
  for (const RunEvent& e : events) {
    plot.markers.push_back({static_cast<double>(e.iteration), e.what, "red", false});
  }
  plot.title = absl::StrFormat(
      "skipswarm local: loss %.3f to %.3f over %zu iterations in %.0f s (red dots: dropped "
      "micro-batches)",
      first, last, plot.points.size(), wall_s);
  std::ofstream(dir + "/loss.svg") << common::RenderSvgLinePlot(plot);
}

}  // namespace skipswarm::launcher
