// The simulator's experiments (sim/README.md has the tables and commands):
//   1  iteration time of pipeline / noskip / random / skippipe / SkipPipe's
//      own routes on the 20-node 12-region setup and a 42-node 8-stage one;
//   2  failure tolerance at 0/10/25/50% of non-data nodes failing (Poisson
//      and correlated), ours vs full pipelines waiting for a replacement;
//   3  scale: 100/300/1000 nodes (iteration and planning time; gossip
//      convergence of the real membership code on its simulated network);
//   speed: 1,000 nodes, 16 stages, 100 iterations, 5% failing, timed
//      (other sizes with ExperimentOptions::speed_nodes).
// Each prints a markdown table to the stream.
//
//   bazel run -c opt //sim:experiments -- --exp=1
//
// Thread rule: single-threaded.
#ifndef SKIPSWARM_SIM_EXPERIMENTS_H_
#define SKIPSWARM_SIM_EXPERIMENTS_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/clock.h"

namespace skipswarm::sim {

struct ExperimentOptions {
  std::string scenarios_dir = "sim/scenarios";
  int seeds = 1;                  // runs averaged per cell (exp 2)
  int max_evaluations = 3000;     // skippipe planner effort (exp 2, 3)
  int stall_evaluations = 500;
  common::Clock* wall = nullptr;  // times planning and runs (required)
  // Experiment 2 and speed: "executor" (sim/driver.h), "nodes" (node/'s
  // classes, sim/node_swarm.h) or "both" (exp 2: ours on both, side by side).
  std::string backend = "nodes";
  // Failure detection on the nodes backend (SimOptions::detection): "auto",
  // "swim", "model", or "both" (experiment 2 and speed: a row of each).
  std::string detection = "auto";
  // Speed: swarm sizes to time (the acceptance run is 1,000).
  std::vector<int> speed_nodes = {1000};
  int speed_iterations = 100;  // the acceptance run's 100
};

absl::Status RunExperiment1(const ExperimentOptions& o, std::ostream& out);
absl::Status RunExperiment2(const ExperimentOptions& o, std::ostream& out);
absl::Status RunExperiment3(const ExperimentOptions& o, std::ostream& out);
absl::Status RunSpeed(const ExperimentOptions& o, std::ostream& out);

// A generated scenario: `nodes` nodes over the 12 GCP regions (round-robin),
// `stages` stages (node i hosts stage i mod stages; data nodes every
// `stages`-th), compute from the region table x U(0.8, 1.2), 3-4 memory
// slots. Exposed for the speed benchmark and tests.
std::string ScaleScenarioJson(int nodes, int stages, int path_length,
                              int mb_per_data_node, int iterations,
                              double fail_fraction, double fail_until_s);

}  // namespace skipswarm::sim

#endif  // SKIPSWARM_SIM_EXPERIMENTS_H_
