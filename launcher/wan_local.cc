#include "launcher/wan_local.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "node/transport/shaping_flags.h"
#include "scheduler/evaluator.h"
#include "scheduler/planner.h"
#include "sim/driver.h"

ABSL_FLAG(std::string, wan, "",
          "WAN emulation: run the real daemons of this simulation scenario (sim/README.md) "
          "on loopback over gRPC with its links shaped (latency + bandwidth per node pair); "
          "prints the measured iteration time next to the simulator's.");
ABSL_FLAG(std::string, wan_planner, "",
          "Planner for the --wan routes (pipeline, noskip, random, skippipe, replay); "
          "default: the scenario's.");
ABSL_FLAG(uint64_t, wan_seed, 1, "Planning seed for --wan (as skipswarm sim --seed).");
ABSL_FLAG(int, wan_iterations, 0,
          "Iterations of the --wan run; 0: the scenario's + 1 (the first, which opens the "
          "gRPC streams, is left out of the comparison).");
ABSL_FLAG(std::string, wan_compute, "timed",
          "timed: daemons use TimedStageCompute with the scenario's compute times; torch: "
          "they train the real model (model flags) and compute costs what it costs here.");
ABSL_FLAG(int64_t, wan_payload_bytes, 256 << 10,
          "Timed compute: real bytes per activation/gradient frame (<= the scenario's "
          "bytes_per_mb); link bandwidths are scaled by the same ratio.");

namespace skipswarm::launcher {
namespace {

using sim::ChurnEvent;
using sim::ChurnKind;
using sim::SimOptions;
using sim::SimReport;
using sim::SimScenario;

using nlohmann::json;

std::string Quote(const std::string& s) { return json(s).dump(); }

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  return static_cast<bool>(out);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return 0;
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

absl::StatusOr<WanSetup> MakeWanSetup(const SimScenario& sc, const WanSetupOptions& o) {
  const scheduler::TopologyView& u = sc.universe.view;
  for (int v = 0; v < u.num_nodes(); ++v) {
    if (!sc.initially_present[v]) {
      return absl::InvalidArgumentError("WAN emulation runs the initial members only: "
                                        "the scenario has joiners");
    }
  }
  WanSetup w;
  w.planner = o.planner.empty() ? sc.planner : o.planner;
  SS_ASSIGN_OR_RETURN(std::unique_ptr<scheduler::Planner> planner,
                      scheduler::CreatePlanner(w.planner));
  // The request `skipswarm sim` makes for its first iteration (sim/driver.cc).
  scheduler::PlanRequest req;
  req.view = &u;
  req.workload = sc.universe.workload;
  req.seed = sc.seed;
  req.max_evaluations = o.max_evaluations;
  req.stall_evaluations = std::max(100, o.max_evaluations / 6);
  scheduler::Plan replay;
  if (w.planner == "replay") {
    SS_ASSIGN_OR_RETURN(replay, sc.universe.RouteSet(sc.replay_key));
    req.replay = &replay;
  }
  SS_ASSIGN_OR_RETURN(w.plan, planner->MakePlan(req));
  SS_ASSIGN_OR_RETURN(scheduler::Evaluation ev, scheduler::Evaluate(u, w.plan));
  w.planned_s = ev.iteration_time_s;
  SS_ASSIGN_OR_RETURN(scheduler::Evaluation contended,
                      scheduler::Evaluate(u, w.plan, /*link_contention=*/true));
  w.planned_contention_s = contended.iteration_time_s;

  // Links. With the scenario's region table when it reproduces every hop
  // time (no per-node overrides); else one "region" per node with
  // bandwidth-only links of the pair's hop time (SkipPipe's delays).
  const double bytes = u.model().bytes_per_mb;
  w.payload_bytes = bytes > 0 ? std::min(bytes, o.payload_bytes) : o.payload_bytes;
  const double byte_scale = bytes > 0 ? w.payload_bytes / bytes : 1;
  bool regions_ok = !sc.region_links.empty();
  for (int a = 0; a < u.num_nodes() && regions_ok; ++a) {
    for (int b = 0; b < u.num_nodes() && regions_ok; ++b) {
      if (a == b || std::isinf(u.hop_s(a, b))) continue;
      std::string ra = u.node(a).region, rb = u.node(b).region;
      if (rb < ra) std::swap(ra, rb);
      auto it = sc.region_links.find({ra, rb});
      regions_ok = it != sc.region_links.end() &&
                   std::abs(scheduler::HopSeconds(it->second, bytes, sc.hop_overhead_s) -
                            u.hop_s(a, b)) < 1e-9;
    }
  }
  w.per_node_links = !regions_ok;
  for (int a = 0; a < u.num_nodes(); ++a) {
    const std::string& name = u.node(a).name;
    w.table.nodes[name].region = regions_ok ? u.node(a).region : name;
    if (regions_ok) continue;
    for (int b = a + 1; b < u.num_nodes(); ++b) {
      const double hop = u.hop_s(a, b);
      if (std::isinf(hop)) continue;
      w.table.AddLink(name, u.node(b).name,
                      {absl::ZeroDuration(), hop > 0 ? w.payload_bytes / hop : 0});
    }
  }
  if (regions_ok) {
    for (const auto& [k, l] : sc.region_links) {
      // The fixed per-hop overhead of the cost model rides on the latency.
      w.table.AddLink(k.first, k.second,
                      {absl::Seconds(l.latency_s + sc.hop_overhead_s),
                       l.bandwidth_bytes_per_s * byte_scale});
    }
  }

  // Routes, by name (the whole cycle minus the return hop).
  for (const scheduler::Route& r : w.plan.routes) {
    std::vector<std::string> hops;
    for (size_t h = 0; h + 1 < r.nodes.size(); ++h) {
      hops.push_back(absl::StrCat(u.node(r.nodes[h]).name, "/", u.stage(r.nodes[h])));
    }
    absl::StrAppend(&w.routes, u.node(r.origin).name, " -1 priority=", r.priority, " ",
                    absl::StrJoin(hops, " "), "   # mb ", r.mb, "\n");
  }

  // Daemons.
  for (int v = 0; v < u.num_nodes(); ++v) {
    LocalNodePlan n;
    n.name = u.node(v).name;
    n.stages = {u.stage(v)};
    std::vector<std::string> kv = {
        absl::StrCat("\"stages\": ", u.num_stages()),
        absl::StrCat("\"memory_slots\": ", u.memory_slots(v)),
        absl::StrCat("\"node_mbs\": ", sc.universe.workload.mb_per_data_node)};
    if (o.timed_compute) {
      kv.push_back(absl::StrFormat("\"node_timed_forward_s\": %.9g", u.forward_s(v)));
      kv.push_back(absl::StrCat("\"node_timed_payload_bytes\": ",
                                static_cast<int64_t>(w.payload_bytes)));
    }
    n.extra_config = absl::StrJoin(kv, ",\n  ");
    w.nodes.push_back(std::move(n));
  }
  return w;
}

absl::StatusOr<double> SimulatedIterationSeconds(const SimScenario& scenario,
                                                 const scheduler::Plan& plan) {
  SimScenario sc = scenario;
  sc.churn = {};
  sc.universe.route_sets["wan-emulated"] = plan;
  sc.replay_key = "wan-emulated";
  SimOptions o;
  o.planner = "replay";
  o.iterations = 1;
  SS_ASSIGN_OR_RETURN(SimReport r, sim::RunSimulation(sc, o));
  if (r.iterations.empty()) return absl::InternalError("the simulation ran no iteration");
  return r.iterations[0].time_s;
}

std::map<std::string, int64_t> ScheduledKills(const SimScenario& scenario, double iteration_s,
                                              int* skipped) {
  std::map<std::string, int64_t> kills;
  *skipped = 0;
  for (const ChurnEvent& e : scenario.churn.events) {
    if (e.kind != ChurnKind::kKill) {
      ++*skipped;
      continue;
    }
    // The real run has one more iteration first (opening the streams), and
    // the launcher kills once an iteration is reported: "k" kills at the
    // start of the scenario's iteration k, the one at_s falls in.
    const int64_t at =
        iteration_s > 0 ? static_cast<int64_t>(std::floor(e.at_s / iteration_s)) : 0;
    for (const std::string& n : e.nodes) kills.emplace(n, at);
  }
  return kills;
}

absl::StatusOr<std::map<int, double>> ReadIterationTimes(const std::string& progress_file) {
  std::ifstream in(progress_file);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", progress_file));
  std::map<int, double> out;
  std::string line;
  while (std::getline(in, line)) {
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("iteration") || !j.contains("iteration_s")) continue;
    if (!j["iteration"].is_number() || !j["iteration_s"].is_number()) continue;
    double& t = out[j["iteration"].get<int>()];
    t = std::max(t, j["iteration_s"].get<double>());
  }
  return out;
}

LocalSwarmPlanner WanLocalPlanner() {
  return [](const std::string& dir) -> absl::StatusOr<std::optional<LocalSwarmPlan>> {
    const std::string path = absl::GetFlag(FLAGS_wan);
    SS_ASSIGN_OR_RETURN(node::ShapingFlags shaping, node::ReadShapingFlags());
    if (!shaping.wan_table.empty()) {
      return absl::InvalidArgumentError("skipswarm local writes its own --wan_table (use --wan)");
    }
    if (path.empty()) {
      // The plain launcher does not pass shaping on to its nodes.
      if (shaping.time_scale != 1 || shaping.max_upload_bytes_per_second > 0 ||
          shaping.max_download_bytes_per_second > 0) {
        return absl::InvalidArgumentError(
            "--wan_time_scale, --max_upload_mbps and --max_download_mbps apply to "
            "skipswarm local --wan=SCENARIO (or to each skipswarm node)");
      }
      return std::nullopt;
    }
    const std::string compute = absl::GetFlag(FLAGS_wan_compute);
    if (compute != "timed" && compute != "torch") {
      return absl::InvalidArgumentError("--wan_compute must be timed or torch");
    }
    SS_ASSIGN_OR_RETURN(SimScenario sc, sim::LoadSimScenario(path, absl::GetFlag(FLAGS_wan_seed)));
    WanSetupOptions o;
    o.planner = absl::GetFlag(FLAGS_wan_planner);
    o.payload_bytes = static_cast<double>(std::max<int64_t>(1, absl::GetFlag(FLAGS_wan_payload_bytes)));
    o.timed_compute = compute == "timed";
    SS_ASSIGN_OR_RETURN(WanSetup w, MakeWanSetup(sc, o));
    const std::string table_file = dir + "/wan-table.txt";
    const std::string routes_file = dir + "/wan-routes.txt";
    if (!WriteFile(table_file, node::FormatWanTable(w.table)) ||
        !WriteFile(routes_file, absl::StrCat("# ", w.planner, " plan of ", sc.name, "\n",
                                             w.routes))) {
      return absl::UnavailableError(absl::StrCat("cannot write into ", dir));
    }
    const double k = shaping.time_scale;
    LocalSwarmPlan plan;
    for (LocalNodePlan& n : w.nodes) {
      absl::StrAppend(&n.extra_config, ",\n  \"wan_table\": ", Quote(table_file),
                      ",\n  \"wan_time_scale\": ", absl::StrFormat("%.9g", k),
                      ",\n  \"node_routes\": ", Quote(routes_file));
      if (shaping.max_upload_bytes_per_second > 0) {
        absl::StrAppendFormat(&n.extra_config, ",\n  \"max_upload_mbps\": %.9g",
                              shaping.max_upload_bytes_per_second * 8 / 1e6);
      }
      if (shaping.max_download_bytes_per_second > 0) {
        absl::StrAppendFormat(&n.extra_config, ",\n  \"max_download_mbps\": %.9g",
                              shaping.max_download_bytes_per_second * 8 / 1e6);
      }
      plan.nodes.push_back(n);
    }
    const int iterations = absl::GetFlag(FLAGS_wan_iterations) > 0
                               ? absl::GetFlag(FLAGS_wan_iterations)
                               : sc.iterations + 1;
    plan.iterations = iterations;
    if (!sc.churn.events.empty()) {
      SS_ASSIGN_OR_RETURN(double iteration_s, SimulatedIterationSeconds(sc, w.plan));
      int skipped = 0;
      plan.kills = ScheduledKills(sc, iteration_s, &skipped);
      for (const auto& [name, at] : plan.kills) {
        std::cerr << "skipswarm local --wan: killing " << name << " after iteration " << at
                  << " (the scenario's kill)\n";
      }
      if (skipped > 0) {
        std::cerr << "skipswarm local --wan: " << skipped
                  << " churn events other than kills are not played\n";
      }
    }
    plan.description = absl::StrFormat(
        "WAN emulation of %s (%s routes, %d MBs, time scale %g, %s compute, %.0f-byte "
        "frames, %s links)",
        sc.name.substr(0, sc.name.find(':')), w.planner, static_cast<int>(w.plan.routes.size()),
        k, compute, w.payload_bytes, w.per_node_links ? "per-node-pair" : "region");
    plan.after_run = [dir, sc, w, k, compute, path, kills = plan.kills]() {
      absl::StatusOr<std::map<int, double>> real = ReadIterationTimes(dir + "/progress.jsonl");
      absl::StatusOr<double> sim = SimulatedIterationSeconds(sc, w.plan);
      if (!real.ok() || !sim.ok()) {
        std::cerr << "wan comparison failed: "
                  << (real.ok() ? sim.status() : real.status()) << "\n";
        return;
      }
      std::vector<double> measured;  // scenario seconds, first iteration left out
      std::string per_iteration;
      for (const auto& [it, s] : *real) {
        absl::StrAppendFormat(&per_iteration, " %.3f", s * k);
        if (it > 0) measured.push_back(s * k);
      }
      if (measured.empty() && !real->empty()) measured.push_back(real->begin()->second * k);
      const double med = Median(measured);
      const double gap = *sim > 0 ? (med - *sim) / *sim * 100 : 0;
      std::string text = absl::StrFormat(
          "WAN emulation vs simulator: %s, planner %s, time scale %g, %s compute\n"
          "  simulated iteration (skipswarm sim, same routes): %.3f s  [evaluator: %.3f s; with "
          "link contention: %.3f s]\n"
          "  real daemons, gRPC + shaping on loopback:         %.3f s  (median of %d; measured "
          "x %g; per iteration:%s)\n"
          "  gap: %+.1f%%\n",
          path, w.planner, k, compute, *sim, w.planned_s, w.planned_contention_s, med,
          static_cast<int>(measured.size()), k, per_iteration, gap);
      if (!kills.empty()) {
        std::string played;
        for (const auto& [name, at] : kills) absl::StrAppend(&played, " ", name, "@", at);
        absl::StrAppend(&text, "  kills played:", played,
                        " (the simulated figure is the whole swarm's; compare the iterations "
                        "before the first kill)\n");
      }
      std::printf("%s", text.c_str());
      WriteFile(dir + "/wan-compare.txt", text);
    };
    return plan;
  };
}

}  // namespace skipswarm::launcher
