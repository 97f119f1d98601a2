// Runs several planners on one scenario and evaluates each plan with the
// same evaluator: the acceptance table of `skipswarm plan --planner=all`.
//
//   ComparisonOptions options;
//   options.planners = {"pipeline", "skippipe"};
//   options.clock = &clock;   // times planning and bounds the budget
//   SS_ASSIGN_OR_RETURN(Comparison table, ComparePlanners(scenario, options));
//   std::cout << FormatTable(scenario, table);
//
// Thread rule: pure functions.
#ifndef SKIPSWARM_SCHEDULER_COMPARE_H_
#define SKIPSWARM_SCHEDULER_COMPARE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "scheduler/evaluator.h"
#include "scheduler/planner.h"
#include "scheduler/scenario.h"

namespace skipswarm::scheduler {

struct ComparisonOptions {
  std::vector<std::string> planners;  // names; "replay" uses replay_key
  std::string replay_key = "ca-paths";
  uint64_t seed = 1;
  common::Clock* clock = nullptr;     // null: no timing, no deadline
  absl::Duration budget = absl::Milliseconds(200);
  int candidates_per_stage = 12;
  bool link_contention = false;       // evaluate with contended links
};

struct PlannerResult {
  std::string planner;       // e.g. "replay:ca-paths"
  absl::Status status;       // planning failed: the rest is empty
  Plan plan;
  Evaluation evaluation;
  double planning_ms = 0;
  absl::Status validity;     // ValidatePlan under the planner's own rules
  int min_stage_visits = 0;  // over non-zero stages
  int max_stage_visits = 0;
  double mean_utilisation = 0;  // over nodes that did any work
};

struct Comparison {
  LowerBound lower_bound;
  std::vector<PlannerResult> results;  // in options.planners order
};

absl::StatusOr<Comparison> ComparePlanners(const Scenario& scenario,
                                           const ComparisonOptions& options);

// A readable table, one planner per row.
std::string FormatTable(const Scenario& scenario, const Comparison& table);
// One JSON object per result (planner, iteration_time_s, lower_bound_s,
// planning_ms, valid, stage_visits, routes [{mb, origin, nodes, priority,
// release_s}] with node names).
std::string ResultJson(const Scenario& scenario, const Comparison& table,
                       const PlannerResult& result);

}  // namespace skipswarm::scheduler

#endif  // SKIPSWARM_SCHEDULER_COMPARE_H_
