// bazel run -c opt //sim:experiments -- --exp=1|2|3|speed|all
//     [--seeds=N] [--max_evaluations=N] [--stall_evaluations=N]
//     [--backend=nodes|executor|both] [--detection=auto|swim|model|both]
//     [--speed_nodes=100,300,1000]
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "common/real_clock.h"
#include "sim/experiments.h"

ABSL_FLAG(std::string, exp, "1", "Which experiment: 1, 2, 3, speed or all.");
ABSL_FLAG(int, seeds, 1, "Runs averaged per cell (experiment 2).");
ABSL_FLAG(int, max_evaluations, 3000,
          "skippipe planner: evaluation limit (experiments 2, 3, speed).");
ABSL_FLAG(int, stall_evaluations, 500,
          "skippipe planner: stop after this many non-improving steps.");
ABSL_FLAG(std::string, backend, "nodes",
          "Experiment 2 and speed: nodes (node/'s real classes), executor, or "
          "both (experiment 2 side by side).");
ABSL_FLAG(std::string, detection, "auto",
          "Nodes backend's failure detection: swim (membership/'s real SWIM), "
          "model (sim/detector.h), auto (swim up to 300 nodes), or both "
          "(experiment 2 and speed: a row of each).");
ABSL_FLAG(std::vector<std::string>, speed_nodes, {"1000"},
          "Speed: swarm sizes to time, e.g. 100,300,1000.");
ABSL_FLAG(int, speed_iterations, 100,
          "Speed: iterations per run (the acceptance run: 100).");
ABSL_FLAG(std::string, scenarios_dir, "sim/scenarios",
          "Folder of the shipped scenarios and tables.");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  auto wall = skipswarm::common::RealClock::Create();
  skipswarm::sim::ExperimentOptions o;
  o.scenarios_dir = absl::GetFlag(FLAGS_scenarios_dir);
  o.seeds = absl::GetFlag(FLAGS_seeds);
  o.max_evaluations = absl::GetFlag(FLAGS_max_evaluations);
  o.stall_evaluations = absl::GetFlag(FLAGS_stall_evaluations);
  o.wall = wall.get();
  o.backend = absl::GetFlag(FLAGS_backend);
  o.detection = absl::GetFlag(FLAGS_detection);
  o.speed_iterations = absl::GetFlag(FLAGS_speed_iterations);
  o.speed_nodes.clear();
  for (const std::string& n : absl::GetFlag(FLAGS_speed_nodes)) {
    int v = 0;
    if (!absl::SimpleAtoi(n, &v) || v < 32) {
      std::cerr << "experiments: --speed_nodes: bad size " << n << "\n";
      return 2;
    }
    o.speed_nodes.push_back(v);
  }
  const std::string exp = absl::GetFlag(FLAGS_exp);
  absl::Status st;
  auto want = [&](const char* e) { return exp == e || exp == "all"; };
  if (st.ok() && want("1")) st = skipswarm::sim::RunExperiment1(o, std::cout);
  if (st.ok() && want("2")) st = skipswarm::sim::RunExperiment2(o, std::cout);
  if (st.ok() && want("3")) st = skipswarm::sim::RunExperiment3(o, std::cout);
  if (st.ok() && want("speed")) st = skipswarm::sim::RunSpeed(o, std::cout);
  if (!st.ok()) {
    std::cerr << "experiments: " << st << "\n";
    return 1;
  }
  return 0;
}
