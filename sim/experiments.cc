#include "sim/experiments.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/random.h"
#include "common/status_macros.h"
#include "scheduler/evaluator.h"
#include "sim/driver.h"
#include "sim/node_swarm.h"
#include "sim/report.h"
#include "sim/scenario.h"
#include <nlohmann/json.hpp>

namespace skipswarm::sim {
namespace {

using nlohmann::json;

std::string Pct(double part, double whole) {
  return whole > 0 ? absl::StrFormat("%.0f%%", 100 * part / whole) : "-";
}

}  // namespace

std::string ScaleScenarioJson(int nodes, int stages, int path_length,
                              int mb_per_data_node, int iterations,
                              double fail_fraction, double fail_until_s) {
  static const char* kRegions[] = {"Australia", "Belgium", "Canada", "Germany",
                                   "Iowa",      "Japan",   "LA",     "NL",
                                   "Oregon",    "Singapore", "Taiwan", "London"};
  common::Random rng(static_cast<uint64_t>(nodes) * 131 + stages);
  json list = json::array();
  for (int i = 0; i < nodes; ++i) {
    const std::string region = kRegions[i % 12];
    list.push_back({{"name", absl::StrCat("n", i)},
                    {"stage", i % stages},
                    {"region", region},
                    {"sec_per_layer_sample", 0.055 * rng.Uniform(0.8, 1.2)},
                    {"memory_slots", 3 + static_cast<int>(rng.UniformInt(0, 1))}});
  }
  json sc = {
      {"name", absl::StrCat("scale-", nodes, ": ", nodes, " nodes, ", stages,
                            " stages over the 12 GCP regions")},
      {"iterations", iterations},
      {"planner", "skippipe"},
      {"topology",
       {{"model", {{"num_stages", stages}, {"layers_per_stage", 2},
                   {"samples_per_mb", 2}, {"bytes_per_mb", 33554432}}},
        {"workload", {{"mb_per_data_node", mb_per_data_node},
                      {"path_length", path_length}}},
        {"links_csv", "gcp12-links.csv"},
        {"nodes", list}}}};
  if (fail_fraction > 0) {
    sc["churn"] = json::array({{{"type", "poisson_failures"},
                                {"fraction", fail_fraction},
                                {"from_s", 1},
                                {"to_s", fail_until_s}}});
  }
  return sc.dump();
}

absl::Status RunExperiment1(const ExperimentOptions& o, std::ostream& out) {
  const std::vector<std::string> files = {"gcp20-skippipe.json",
                                          "gcp12-42.json"};
  const std::vector<std::string> planners = {"pipeline", "noskip", "random",
                                             "skippipe", "replay"};
  struct Cell {
    double time = -1;
    double plan_ms = 0;
    double real = -1;  // the same plan run by the real node code
  };
  std::map<std::string, std::vector<Cell>> rows;
  std::vector<double> bounds;
  for (const std::string& f : files) {
    SS_ASSIGN_OR_RETURN(SimScenario sc,
                        LoadSimScenario(o.scenarios_dir + "/" + f, 1));
    SS_ASSIGN_OR_RETURN(scheduler::LowerBound lb,
                        scheduler::ComputeLowerBound(sc.universe.view,
                                                     sc.universe.workload));
    bounds.push_back(lb.seconds);
    for (const std::string& p : planners) {
      Cell cell;
      if (p == "replay" && sc.replay_key.empty()) {
        rows[p].push_back(cell);
        continue;
      }
      SimOptions opts;
      opts.planner = p;
      opts.iterations = 1;
      opts.wall_clock = o.wall;
      SS_ASSIGN_OR_RETURN(SimReport r, RunSimulation(sc, opts));
      cell.time = r.iterations.at(0).time_s;
      cell.plan_ms = r.planning_wall_ms;
      opts.wall_clock = nullptr;
      SS_ASSIGN_OR_RETURN(SimReport real, RunNodeSimulation(sc, opts));
      cell.real = real.iterations.at(0).time_s;
      rows[p].push_back(cell);
    }
  }
  out << "Experiment 1: simulated iteration time (one iteration, no churn; "
         "the executor equals the scheduler's evaluator here; \"real node "
         "code\": the same planner's plan run by node/'s StageServer, "
         "DataNodeDriver and NodeTrainer on timed compute, sim/node_swarm.h)"
         "\n\n"
      << "| planner | gcp20 (20 nodes, 6 stages, P=4) | vs pipeline | "
         "real node code | planning ms | gcp12-42 (42 nodes, 8 stages, P=6) | "
         "vs pipeline | real node code | planning ms |\n"
         "|---|---|---|---|---|---|---|---|---|\n";
  for (const std::string& p : planners) {
    std::string line = absl::StrCat(
        "| ", p == "replay" ? "SkipPipe's own routes (replay ca-paths)" : p);
    for (size_t i = 0; i < files.size(); ++i) {
      const Cell& c = rows[p][i];
      const double base = rows["pipeline"][i].time;
      if (c.time < 0) {
        absl::StrAppend(&line, " | n/a | | | ");
      } else {
        absl::StrAppend(&line, absl::StrFormat(" | %.2f s | %s | %.2f s | %.0f",
                                               c.time, Pct(c.time, base),
                                               c.real, c.plan_ms));
      }
    }
    out << line << " |\n";
  }
  out << absl::StrFormat("| lower bound | %.2f s | | | | %.2f s | | | |\n\n",
                         bounds[0], bounds[1]);
  // SkipPipe's own predictions, from its file, for reference.
  std::ifstream in(o.scenarios_dir + "/skippipe-gcp20-schedule.json");
  json sp = json::parse(in, nullptr, false);
  if (!sp.is_discarded()) {
    out << absl::StrFormat(
        "SkipPipe's file predicts: baseline (pipeline) %.2f s, ca-paths "
        "%.2f s, non-ca %.2f s, random %.2f s.\n",
        sp.value("baseline-expected-time", 0.0),
        sp.value("ca-expected-time", 0.0), sp.value("nonca-expected-time", 0.0),
        sp.value("random-expected-time", 0.0));
  }
  return absl::OkStatus();
}

absl::Status RunExperiment2(const ExperimentOptions& o, std::ostream& out) {
  const std::vector<double> fractions = {0, 0.10, 0.25, 0.50};
  const int iterations = 20;  // ~600 simulated s on gcp12-42
  out << "Experiment 2: failure tolerance on gcp12-42 (35 non-data nodes), "
      << iterations << " iterations, failures spread over 10..400 s, "
      << o.seeds << " seed(s) per cell\n\n"
      << "| system | failures | share | nodes killed | MBs completed | "
         "MB/s | throughput kept | MBs dropped | MBs re-routed | mean iteration s | "
         "max detect s | max re-route s | max resume s | mean first re-route s | "
         "gossip detect s: mean first / mean all / max all | false DEAD |\n"
      << "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  struct System {
    std::string name;
    std::string planner;
    bool wait;
    bool nodes;  // run on node/'s classes (sim/node_swarm.h)
    std::string detection = "model";  // on the nodes backend
  };
  std::vector<System> systems;
  if (o.backend != "executor") {
    std::vector<std::string> detections = {o.detection == "auto" ? "swim" : o.detection};
    if (o.detection == "both") detections = {"swim", "model"};
    for (const std::string& d : detections) {
      systems.push_back({absl::StrCat("skippipe + re-route (ours), real node code, ",
                                      d == "swim" ? "real SWIM" : "detector model"),
                         "skippipe", false, true, d});
    }
  }
  if (o.backend != "nodes") {
    systems.push_back({"skippipe + re-route (ours), executor", "skippipe", false, false});
  }
  // The baseline's "idle broken pipeline" is a policy of the executor
  // backend only.
  systems.push_back(
      {"full pipelines, wait 60 s for a replacement (executor)", "pipeline", true, false});
  for (const System& sys : systems) {
    double base_tput = 0;
    for (const std::string mode : {"poisson", "correlated"}) {
      for (double f : fractions) {
        if (f == 0 && mode == std::string("correlated")) continue;
        double completed = 0, dropped = 0, rerouted = 0, killed = 0;
        double tput = 0, mean_it = 0, det = 0, rer = 0, res = 0;
        double first_sum = 0;  // crash -> first re-route, over failures
        int first_n = 0;       // that had one
        double gfirst = 0, gall = 0, gmax = 0;  // gossip verdicts, over failures
        int gfirst_n = 0, gall_n = 0, false_dead = 0;
        for (int seed = 1; seed <= o.seeds; ++seed) {
          json sc = {{"topology_file", "gcp12-42.json"},
                     {"name", "gcp12-42"},
                     {"iterations", iterations}};
          if (f > 0) {
            sc["churn"] = json::array(
                {{{"type", mode == std::string("poisson")
                               ? "poisson_failures"
                               : "correlated_failures"},
                  {"fraction", f},
                  {"from_s", 10},
                  {"to_s", 400}}});
          }
          SS_ASSIGN_OR_RETURN(SimScenario scenario,
                              ParseSimScenario(sc.dump(), o.scenarios_dir,
                                               seed));
          SimOptions opts;
          opts.planner = sys.planner;
          opts.wait_for_replacement = sys.wait;
          opts.replacement_s = 60;  // both systems get replacements
          opts.max_evaluations = o.max_evaluations;
          opts.stall_evaluations = o.stall_evaluations;
          opts.detection = sys.detection;
          SS_ASSIGN_OR_RETURN(SimReport r, sys.nodes ? RunNodeSimulation(scenario, opts)
                                                     : RunSimulation(scenario, opts));
          const ReportSummary s = Summarise(r);
          completed += s.completed;
          dropped += s.dropped;
          rerouted += s.rerouted;
          killed += r.failures.size();
          tput += s.throughput_mb_per_s;
          mean_it += s.mean_iteration_s;
          det = std::max(det, s.max_detect_s);
          false_dead += r.gossip_false_dead;
          for (const FailureRecord& fr : r.failures) {
            if (fr.first_gossip_detect_s >= 0) {
              gfirst += fr.first_gossip_detect_s;
              ++gfirst_n;
            }
            if (fr.gossip_detect_s >= 0) {
              gall += fr.gossip_detect_s;
              ++gall_n;
              gmax = std::max(gmax, fr.gossip_detect_s);
            }
            if (fr.first_reroute_s < 0) continue;
            first_sum += fr.first_reroute_s;
            ++first_n;
          }
          rer = std::max(rer, s.max_reroute_s);
          res = std::max(res, s.max_resume_s);
        }
        const double k = o.seeds;
        if (f == 0) base_tput = tput / k;
        out << absl::StrFormat(
            "| %s | %s | %.0f%% | %.1f | %.0f | %.3f | %s | %.1f | %.1f | %.1f | "
            "%.2f | %.3f | %.2f | %s | %s | %.1f |\n",
            sys.name, f == 0 ? "none" : mode, 100 * f, killed / k,
            completed / k, tput / k, Pct(tput / k, base_tput), dropped / k,
            rerouted / k, mean_it / k, det, rer, res,
            first_n > 0 ? absl::StrFormat("%.2f", first_sum / first_n) : std::string("-"),
            gall_n > 0 ? absl::StrFormat("%.2f / %.2f / %.2f", gfirst / std::max(gfirst_n, 1),
                                         gall / gall_n, gmax)
                       : std::string("-"),
            false_dead / k);
      }
    }
  }
  out << "\nthroughput kept = completed MBs per simulated second relative "
         "to the same system with no failures. detect = a hop's failure to "
         "the holder noticing (stream timeout 0.5 s, or 0 once its view "
         "calls the node dead); re-route = noticed to new route chosen "
         "and resent (the real stage server re-sends in the same instant: "
         "0; the executor models 1 ms); resume = noticed to the activation arriving at the "
         "replacement (includes one WAN transfer of 32 MiB); first re-route "
         "= the crash to the first MB re-routed around it (failures that "
         "re-routed any; the real node code: the repairer's call). In both systems "
         "a crashed node is replaced by an identical one 60 s later; ours "
         "re-routes meanwhile, the baseline's broken pipeline (every node "
         "on a route through the dead one) idles until then.\n";
  return absl::OkStatus();
}

}  // namespace skipswarm::sim
