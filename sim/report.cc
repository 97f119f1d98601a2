#include "sim/report.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "common/svg_plot.h"
#include <nlohmann/json.hpp>

namespace skipswarm::sim {
namespace {

using ordered_json = nlohmann::ordered_json;

// Rounded to microseconds: keeps the report readable; the values are
// deterministic either way.
double R(double x) {
  if (!std::isfinite(x)) return -1;
  return std::round(x * 1e6) / 1e6;
}

ordered_json Rounded(const std::vector<double>& xs) {
  ordered_json out = ordered_json::array();
  for (double x : xs) out.push_back(R(x));
  return out;
}

}  // namespace

ReportSummary Summarise(const SimReport& report) {
  ReportSummary s;
  double total = 0;
  for (const IterationRecord& it : report.iterations) {
    total += it.time_s;
    s.mbs += it.mbs;
    s.completed += it.completed;
    s.dropped += it.dropped;
    s.rerouted += it.rerouted;
  }
  if (!report.iterations.empty()) s.mean_iteration_s = total / report.iterations.size();
  if (report.total_s > 0) s.throughput_mb_per_s = s.completed / report.total_s;
  for (const FailureRecord& f : report.failures) {
    for (double d : f.detect_s) s.max_detect_s = std::max(s.max_detect_s, d);
    for (double d : f.reroute_s) s.max_reroute_s = std::max(s.max_reroute_s, d);
    for (double d : f.resume_s) s.max_resume_s = std::max(s.max_resume_s, d);
    s.max_gossip_detect_s = std::max(s.max_gossip_detect_s, f.gossip_detect_s);
  }
  return s;
}

std::string ReportJson(const SimReport& report) {
  const ReportSummary s = Summarise(report);
  ordered_json j;
  j["scenario"] = report.scenario;
  j["seed"] = report.seed;
  j["planner"] = report.planner;
  j["detection"] = report.detection;
  j["wait_for_replacement"] = report.wait_for_replacement;
  j["replacement_s"] = R(report.replacement_s);
  j["summary"] = {{"iterations", report.iterations.size()},
                  {"total_s", R(report.total_s)},
                  {"mean_iteration_s", R(s.mean_iteration_s)},
                  {"mbs", s.mbs},
                  {"mbs_completed", s.completed},
                  {"mbs_dropped", s.dropped},
                  {"mbs_rerouted", s.rerouted},
                  {"throughput_mb_per_s", R(s.throughput_mb_per_s)},
                  {"failures", report.failures.size()},
                  {"max_detect_s", R(s.max_detect_s)},
                  {"max_reroute_s", R(s.max_reroute_s)},
                  {"max_resume_s", R(s.max_resume_s)},
                  {"max_gossip_detect_s", R(s.max_gossip_detect_s)},
                  {"gossip_false_dead", report.gossip_false_dead},
                  {"stalled_s", R(report.stalled_s)},
                  {"link_failures", report.link_failures},
                  {"stopped_early", report.stopped_early}};
  ordered_json its = ordered_json::array();
  for (const IterationRecord& it : report.iterations) {
    its.push_back({{"index", it.index},
                   {"start_s", R(it.start_s)},
                   {"time_s", R(it.time_s)},
                   {"planned_s", R(it.planned_s)},
                   {"members", it.members},
                   {"mbs", it.mbs},
                   {"completed", it.completed},
                   {"dropped", it.dropped},
                   {"rerouted", it.rerouted},
                   {"replanned", it.replanned},
                   {"deadlocked", it.deadlocked}});
  }
  j["iterations"] = std::move(its);
  ordered_json fs = ordered_json::array();
  for (const FailureRecord& f : report.failures) {
    fs.push_back({{"node", f.node},
                  {"stage", f.stage},
                  {"region", f.region},
                  {"cause", f.cause},
                  {"at_s", R(f.at_s)},
                  {"gossip_detect_s", R(f.gossip_detect_s)},
                  {"first_gossip_detect_s", R(f.first_gossip_detect_s)},
                  {"first_reroute_s", R(f.first_reroute_s)},
                  {"mbs_rerouted", f.mbs_rerouted},
                  {"mbs_dropped", f.mbs_dropped},
                  {"detect_s", Rounded(f.detect_s)},
                  {"reroute_s", Rounded(f.reroute_s)},
                  {"resume_s", Rounded(f.resume_s)}});
  }
  j["failures"] = std::move(fs);
  ordered_json cs = ordered_json::array();
  for (const ChurnRecord& c : report.churn) {
    cs.push_back({{"at_s", R(c.at_s)}, {"kind", c.kind}, {"what", c.what}});
  }
  j["churn"] = std::move(cs);
  j["stage_visits"] = report.stage_visits;
  ordered_json ns = ordered_json::array();
  for (const NodeRecord& n : report.nodes) {
    ns.push_back({{"name", n.name},
                  {"stage", n.stage},
                  {"region", n.region},
                  {"busy_s", R(n.busy_s)},
                  {"utilisation", R(n.utilisation)}});
  }
  j["nodes"] = std::move(ns);
  return j.dump(1) + "\n";
}

std::string ReportSvg(const SimReport& report) {
  common::SvgLinePlot plot;
  plot.title = absl::StrFormat("%s (planner %s, seed %d)", report.scenario.substr(0, 70),
                               report.planner, report.seed);
  plot.x_label = "simulated time (s)";
  plot.y_label = "iteration time (s)";
  double y_max = 1e-9;
  for (const IterationRecord& it : report.iterations) {
    if (it.dropped > 0) plot.highlighted.push_back(plot.points.size());
    plot.points.emplace_back(it.start_s + it.time_s, it.time_s);
    y_max = std::max(y_max, it.time_s);
  }
  plot.x_range = std::make_pair(0.0, std::max(report.total_s, 1e-9));
  plot.y_range = std::make_pair(0.0, y_max * 1.1);
  // Many failures and joins in a churn run: their labels are tooltips only.
  for (const FailureRecord& f : report.failures) {
    plot.markers.push_back({f.at_s, absl::StrFormat("%s died at %.2f s", f.node, f.at_s), "red",
                            /*dashed=*/false, /*text=*/false});
  }
  for (const ChurnRecord& c : report.churn) {
    if (c.kind != "join" && c.kind != "revive" && c.kind != "replaced") continue;
    plot.markers.push_back({c.at_s, absl::StrFormat("%s %s at %.2f s", c.kind, c.what, c.at_s),
                            "green", /*dashed=*/true, /*text=*/false});
  }
  return common::RenderSvgLinePlot(plot);
}

}  // namespace skipswarm::sim
