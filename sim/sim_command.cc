#include "sim/sim_command.h"

#include <algorithm>
#include <fstream>
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "common/real_clock.h"
#include "scheduler/averaging_cost.h"
#include "scheduler/hybrid_flags.h"
#include "sim/driver.h"
#include "sim/hybrid_sim.h"
#include "sim/node_swarm.h"
#include "sim/report.h"
#include "sim/scenario.h"

ABSL_FLAG(std::string, sim_scenario, "",
          "Simulation scenario (JSON, sim/README.md); or give it as the "
          "positional argument.");
ABSL_FLAG(uint64_t, sim_seed, 1, "Seed of the run (churn draws, detector).");
ABSL_FLAG(std::string, sim_report, "sim-report.json",
          "Where the JSON report goes (\"-\": stdout, \"\": nowhere).");
ABSL_FLAG(std::string, sim_svg, "sim-report.svg",
          "Where the SVG plot goes (\"\": nowhere).");
ABSL_FLAG(std::string, sim_planner, "",
          "Override the scenario's planner: pipeline, noskip, random, "
          "skippipe, replay.");
ABSL_FLAG(int, sim_iterations, 0, "Override the scenario's iteration count.");
ABSL_FLAG(bool, sim_wait_for_replacement, false,
          "Baseline: no re-routing; dead nodes are replaced after "
          "--replacement_s.");
ABSL_FLAG(double, sim_replacement_s, 0,
          "> 0: a crashed node's identical replacement serves this many "
          "seconds later (needed with --wait_for_replacement).");
ABSL_FLAG(std::string, sim_replan, "full",
          "full: re-plan on every view change; incremental: re-route only "
          "the MBs that used departed nodes.");
ABSL_FLAG(bool, sim_progress, true, "Print a progress bar on stderr.");
ABSL_FLAG(std::string, sim_backend, "auto",
          "nodes: node/'s real StageServer, DataNodeDriver, NodeTrainer and "
          "route repairer on timed compute over the simulated transport "
          "(sim/node_swarm.h); executor: the evaluator-semantics executor "
          "(sim/executor.h). Both play the churn trace and write the same "
          "report. auto: nodes, except --wait_for_replacement (executor "
          "only) and swarms above --nodes_backend_max nodes.");
ABSL_FLAG(int, sim_nodes_backend_max, 1000,
          "--backend=auto: largest swarm (universe nodes) run on the real "
          "node code.");
ABSL_FLAG(std::string, sim_detection, "auto",
          "Failure detection on the nodes backend: swim (membership/'s real "
          "SWIM code, one Membership per node), model (sim/detector.h), auto "
          "(swim up to --swim_max_nodes universe nodes, model above).");
ABSL_FLAG(int, sim_swim_max_nodes, 300,
          "--detection=auto: largest swarm run with real SWIM.");
ABSL_FLAG(int, sim_max_evaluations, 3000,
          "skippipe planner: evaluation limit per plan (effort).");

namespace skipswarm::sim {
namespace {

bool WriteTo(const std::string& path, const std::string& text) {
  if (path.empty()) return true;
  if (path == "-") {
    std::cout << text;
    return true;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  return static_cast<bool>(out);
}

// The scenario's "averaging" comparison (scheduler/averaging_cost.h): each
// configuration's averaging traffic and time on the scenario's uplinks,
// added to the simulated compute iteration (what is not hidden under
// compute with "outer_overlap", scheduler::SecondsPerIteration), against
// the first configuration.
void PrintAveragingCost(const SimScenario& sc, double compute_s, std::ostream& out) {
  const int stages = sc.universe.view.num_stages();
  std::vector<scheduler::AveragingGroup> groups(stages);
  for (int st = 0; st < stages; ++st) {
    groups[st].stage = st;
    groups[st].params = sc.averaging->model_params / stages;
  }
  for (const SimScenario::Uplink& u : sc.uplinks) {
    if (u.stage >= 0 && u.stage < stages) groups[u.stage].uplink_bytes_per_s.push_back(u.bytes_per_s);
  }
  out << absl::StrFormat(
      "averaging: %.0f M parameters in %d stages, compute %.2f s per iteration (simulated)\n",
      sc.averaging->model_params / 1e6, stages, compute_s);
  double base_total = 0;
  for (size_t i = 0; i < sc.averaging->compare.size(); ++i) {
    const model::AveragingOptions& o = sc.averaging->compare[i];
    const scheduler::AveragingCost c = scheduler::CostAveraging(groups, o);
    const double averaging_s = scheduler::SecondsPerIteration(c, o, compute_s);
    const double total = compute_s + averaging_s;
    if (i == 0) base_total = total;
    out << absl::StrFormat(
        "  H=%-3d %-10s%-8s %9.1f MB uploaded/iteration, sync %8.1f s (stage %d), %7.2f "
        "s/iteration averaging = %5.1f%% of the iteration; tokens/s x%.1f vs the first\n",
        static_cast<int>(o.outer_every), model::AvgCodecName(o.codec),
        o.overlap ? " overlap" : "", c.bytes_per_iteration / 1e6, c.sync_s, c.slowest_stage,
        averaging_s, total > 0 ? 100.0 * averaging_s / total : 0.0,
        total > 0 ? base_total / total : 0.0);
  }
}

// --hybrid: pipeline-only vs SDP-only vs mixed (sim/hybrid_sim.h).
int RunHybrid(const SimScenario& sc) {
  // The scenario's "hybrid" object, else the averaging's parameter count.
  absl::StatusOr<scheduler::HybridInputs> in = scheduler::HybridInputsFromFlags(
      sc.averaging.has_value() ? sc.averaging->model_params : 1e9,
      sc.hybrid.has_value() ? &*sc.hybrid : nullptr);
  if (!in.ok()) {
    std::cerr << "sim: " << in.status().message() << "\n";
    return 2;
  }
  SimOptions opts;
  opts.planner = absl::GetFlag(FLAGS_sim_planner);
  opts.iterations = absl::GetFlag(FLAGS_sim_iterations);
  opts.max_evaluations = absl::GetFlag(FLAGS_sim_max_evaluations);
  opts.stall_evaluations = std::max(100, opts.max_evaluations / 6);
  if (!sc.churn.events.empty()) {
    std::cerr << "sim: --hybrid runs the initial swarm without the churn trace\n";
  }
  SimScenario run = sc;
  if (opts.iterations > 0) run.iterations = opts.iterations;
  absl::StatusOr<std::vector<HybridSimRow>> rows = SimulateHybrid(run, *in, opts);
  if (!rows.ok()) {
    std::cerr << "sim: " << rows.status().message() << "\n";
    return 1;
  }
  std::cout << FormatHybridSim(run, *in, *rows);
  return 0;
}

int RunSim(const std::vector<std::string>& args) {
  std::string path = absl::GetFlag(FLAGS_sim_scenario);
  if (path.empty() && args.size() == 1) path = args[0];
  if (path.empty() || args.size() > 1) {
    std::cerr << "usage: skipswarm sim --scenario=FILE [--seed=N]\n";
    return 2;
  }
  const uint64_t seed = absl::GetFlag(FLAGS_sim_seed);
  std::cerr << "sim: scenario " << path << ", seed " << seed << "\n";
  absl::StatusOr<SimScenario> sc = LoadSimScenario(path, seed);
  if (!sc.ok()) {
    std::cerr << "sim: " << sc.status().message() << "\n";
    return 1;
  }
  if (scheduler::HybridRequested()) return RunHybrid(*sc);
  auto wall = common::RealClock::Create();
  std::string backend = absl::GetFlag(FLAGS_sim_backend);
  if (backend == "auto") {
    const bool too_big =
        sc->universe.view.num_nodes() > absl::GetFlag(FLAGS_sim_nodes_backend_max);
    backend = absl::GetFlag(FLAGS_sim_wait_for_replacement) || too_big ? "executor" : "nodes";
  }
  if (backend != "executor" && backend != "nodes") {
    std::cerr << "sim: --sim_backend must be auto, executor or nodes\n";
    return 2;
  }
  std::cerr << "sim: backend " << backend << "\n";
  SimOptions opts;
  opts.planner = absl::GetFlag(FLAGS_sim_planner);
  opts.iterations = absl::GetFlag(FLAGS_sim_iterations);
  opts.wait_for_replacement = absl::GetFlag(FLAGS_sim_wait_for_replacement);
  opts.replacement_s = absl::GetFlag(FLAGS_sim_replacement_s);
  opts.replan = absl::GetFlag(FLAGS_sim_replan);
  opts.max_evaluations = absl::GetFlag(FLAGS_sim_max_evaluations);
  opts.detection = absl::GetFlag(FLAGS_sim_detection);
  opts.swim_max_nodes = absl::GetFlag(FLAGS_sim_swim_max_nodes);
  if (opts.detection != "auto" && opts.detection != "swim" && opts.detection != "model") {
    std::cerr << "sim: --sim_detection must be auto, swim or model\n";
    return 2;
  }
  opts.stall_evaluations = std::max(100, opts.max_evaluations / 6);
  if (opts.replan != "full" && opts.replan != "incremental") {
    std::cerr << "sim: --sim_replan must be full or incremental\n";
    return 2;
  }
  if (absl::GetFlag(FLAGS_sim_progress)) opts.progress = &std::cerr;
  opts.wall_clock = wall.get();
  const absl::Duration t0 = wall->SteadyNow();
  absl::StatusOr<SimReport> report =
      backend == "nodes" ? RunNodeSimulation(*sc, opts) : RunSimulation(*sc, opts);
  const double wall_s = absl::ToDoubleSeconds(wall->SteadyNow() - t0);
  if (!report.ok()) {
    std::cerr << "sim: " << report.status().message() << "\n";
    return 1;
  }
  if (!WriteTo(absl::GetFlag(FLAGS_sim_report), ReportJson(*report)) ||
      !WriteTo(absl::GetFlag(FLAGS_sim_svg), ReportSvg(*report))) {
    std::cerr << "sim: cannot write the report\n";
    return 1;
  }
  const ReportSummary s = Summarise(*report);
  std::ostream& out = absl::GetFlag(FLAGS_sim_report) == "-" ? std::cerr : std::cout;
  out << absl::StrFormat(
      "%s: %d iterations in %.1f simulated s (mean %.2f s, planner %s); "
      "%d/%d MBs completed, %d re-routed, %d dropped; %d failures (max "
      "detect %.2f s, max re-route %.3f s, max resume %.2f s, %s detection "
      "<= %.2f s); wall %.2f s "
      "(planning %.0f ms over %d plans; %d gossip messages)%s\n",
      report->scenario.substr(0, report->scenario.find(':')),
      static_cast<int>(report->iterations.size()), report->total_s,
      s.mean_iteration_s, report->planner, s.completed, s.mbs, s.rerouted,
      s.dropped, static_cast<int>(report->failures.size()), s.max_detect_s,
      s.max_reroute_s, s.max_resume_s, report->detection, s.max_gossip_detect_s, wall_s,
      report->planning_wall_ms, report->plans, static_cast<int>(report->gossip_messages),
      report->stopped_early.empty() ? ""
                                    : "; STOPPED EARLY: " + report->stopped_early);
  if (sc->averaging.has_value()) PrintAveragingCost(*sc, s.mean_iteration_s, out);
  if (s.completed == 0) {
    std::cerr << "sim: no micro-batch completed in " << report->iterations.size()
              << " iterations; nothing was trained\n";
    return 1;
  }
  return report->stopped_early.empty() ? 0 : 1;
}

}  // namespace

common::cli::Command SimCommand() {
  common::cli::Command c{
      "sim", "Simulate a swarm with churn on a simulated clock; write a report",
      "skipswarm sim --scenario=FILE [--seed=N] [--report=report.json] [--svg=report.svg]\n"
      "  skipswarm sim --scenario=FILE --hybrid [--hybrid_*]: pipeline-only vs SDP-only "
      "vs mixed",
      {"sim/sim_command.cc", scheduler::kHybridFlagsFile},
      RunSim};
  // Note [Short flag names]: --scenario, --seed (scheduler/ owns --scenario
  // and model/ owns --seed, so the flags themselves stay prefixed).
  c.flag_prefix = "sim_";
  return c;
}

}  // namespace skipswarm::sim
