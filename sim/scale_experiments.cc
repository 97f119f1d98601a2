// Experiment 3 (scale) and the speed run; see experiments.h.
#include <algorithm>
#include <cmath>
#include <ctime>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "scheduler/evaluator.h"
#include "sim/driver.h"
#include "sim/experiments.h"
#include "sim/gossip_bench.h"
#include "sim/node_swarm.h"
#include "sim/report.h"
#include "sim/scenario.h"

namespace skipswarm::sim {
absl::Status RunExperiment3(const ExperimentOptions& o, std::ostream& out) {
  out << "Experiment 3: scale (16 stages, P=8, M=4 per data node, nodes "
         "round-robin over the 12 GCP regions)\n\n"
      << "| nodes | data nodes | MBs | skippipe iteration s | pipeline "
         "iteration s | lower bound s | skippipe planning ms | gossip "
         "convergence s | crash detected in all views s | gossip msgs/node/s "
         "| gossip bytes/node/s | wall s |\n"
         "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (int n : {100, 300, 1000}) {
    const absl::Duration w0 = o.wall->SteadyNow();
    SS_ASSIGN_OR_RETURN(
        SimScenario sc,
        ParseSimScenario(ScaleScenarioJson(n, 16, 8, 4, 1, 0, 0),
                         o.scenarios_dir, 1));
    SS_ASSIGN_OR_RETURN(scheduler::LowerBound lb,
                        scheduler::ComputeLowerBound(sc.universe.view,
                                                     sc.universe.workload));
    double times[2] = {0, 0};
    double plan_ms = 0;
    int mbs = 0;
    const char* planners[] = {"skippipe", "pipeline"};
    for (int p = 0; p < 2; ++p) {
      SimOptions opts;
      opts.planner = planners[p];
      opts.max_evaluations = o.max_evaluations;
      opts.stall_evaluations = o.stall_evaluations;
      opts.wall_clock = o.wall;
      SS_ASSIGN_OR_RETURN(SimReport r, RunSimulation(sc, opts));
      times[p] = r.iterations.at(0).time_s;
      if (p == 0) {
        plan_ms = r.planning_wall_ms;
        mbs = r.iterations[0].mbs;
      }
    }
    const GossipFigures g = MeasureGossip({.nodes = n, .seed = 1});
    const double wall_s = absl::ToDoubleSeconds(o.wall->SteadyNow() - w0);
    out << absl::StrFormat(
        "| %d | %d | %d | %.2f | %.2f | %.2f | %.0f | %s | %s | %.2f | %.0f | "
        "%.0f |\n",
        n, static_cast<int>(sc.universe.view.data_nodes().size()), mbs,
        times[0], times[1], lb.seconds, plan_ms,
        g.converge_s < 0 ? "> 300" : absl::StrFormat("%.1f", g.converge_s),
        g.detect_s < 0 ? "> 60" : absl::StrFormat("%.2f", g.detect_s),
        g.msgs_per_node_s, g.bytes_per_node_s, wall_s);
    out.flush();
  }
  out << "\nGossip: membership/'s SWIM code (default options: probe 0.5 s, "
         "suspicion 1.2 s, push-pull 5 s) on SimNetwork with "
         "40 ms + U(0, 20 ms) one-way latency; all nodes join through node 0 "
         "at once; traffic counted by a decorator on each node's transport "
         "(serialized protobuf sizes of requests and replies, no gRPC/TLS "
         "framing), over 10 s after convergence.\n";
  return absl::OkStatus();
}

absl::Status RunSpeed(const ExperimentOptions& o, std::ostream& out) {
  constexpr int kStages = 16;
  const int kIterations = o.speed_iterations;
  const bool nodes = o.backend == "nodes";
  std::vector<std::string> detections = {o.detection};
  if (o.detection == "both") detections = {"swim", "model"};
  if (!nodes) detections = {"model"};
  out << "Speed (" << (nodes ? "real node code, sim/node_swarm.h" : "executor, sim/driver.h")
      << "): " << kStages << " stages, " << kIterations
      << " iterations, 5% of non-data nodes failing (Poisson over the run)\n\n"
      << "| nodes | detection | wall s (one thread) | CPU s | planning wall ms | plans | "
         "simulated s | MBs | completed | re-routed | dropped | failures | gossip messages | "
         "mean / max detect in all views s | false DEAD |\n"
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (int n : o.speed_nodes) {
    // One plan first, to spread the failures over the run's simulated span.
    SS_ASSIGN_OR_RETURN(SimScenario probe,
                        ParseSimScenario(ScaleScenarioJson(n, kStages, 8, 4, 1, 0, 0),
                                         o.scenarios_dir, 1));
    SimOptions opts;
    opts.planner = "skippipe";
    opts.replan = "incremental";
    opts.max_evaluations = o.max_evaluations;
    opts.stall_evaluations = o.stall_evaluations;
    opts.wall_clock = o.wall;
    SS_ASSIGN_OR_RETURN(SimReport first, RunSimulation(probe, opts));
    const double span = first.iterations.at(0).time_s * kIterations * 0.8;
    SS_ASSIGN_OR_RETURN(
        SimScenario sc,
        ParseSimScenario(ScaleScenarioJson(n, kStages, 8, 4, kIterations, 0.05, span),
                         o.scenarios_dir, 1));
    for (const std::string& detection : detections) {
      opts.detection = detection;
      const absl::Duration w0 = o.wall->SteadyNow();
      // CPU time too: on the shared 2-core machine the wall time mostly
      // measures the other processes (load average 5-10).
      const std::clock_t c0 = std::clock();
      SS_ASSIGN_OR_RETURN(SimReport r,
                          nodes ? RunNodeSimulation(sc, opts) : RunSimulation(sc, opts));
      const double cpu_s = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
      const double wall_s = absl::ToDoubleSeconds(o.wall->SteadyNow() - w0);
      const ReportSummary s = Summarise(r);
      double det_sum = 0;
      int det_n = 0;
      for (const FailureRecord& f : r.failures) {
        if (f.gossip_detect_s < 0) continue;
        det_sum += f.gossip_detect_s;
        ++det_n;
      }
      out << absl::StrFormat(
          "| %d | %s | %.2f | %.2f | %.0f | %d | %.0f | %d | %d | %d | %d | %d | %d | "
          "%.2f / %.2f | %d |\n",
          n, r.detection, wall_s, cpu_s, r.planning_wall_ms, r.plans, r.total_s, s.mbs,
          s.completed, s.rerouted, s.dropped, static_cast<int>(r.failures.size()),
          static_cast<int>(r.gossip_messages), det_n > 0 ? det_sum / det_n : 0.0,
          s.max_gossip_detect_s, r.gossip_false_dead);
      out.flush();
    }
  }
  return absl::OkStatus();
}

}  // namespace skipswarm::sim
