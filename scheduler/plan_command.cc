#include "scheduler/plan_command.h"

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/real_clock.h"
#include "scheduler/compare.h"
#include "scheduler/hybrid_flags.h"
#include "scheduler/planner.h"
#include "scheduler/scenario.h"

ABSL_FLAG(std::string, scenario, "",
          "Scenario file: SkipSwarm's JSON format or SkipPipe's schedule.json "
          "(recognised by its \"delays\" key).");
ABSL_FLAG(std::string, skippipe_json, "",
          "SkipPipe schedule.json to plan for (same as --scenario, but the "
          "file must be in SkipPipe's format).");
ABSL_FLAG(double, forward_s, 0.44,
          "SkipPipe files only: forward seconds per micro-batch per stage.");
ABSL_FLAG(int, path_length, 0,
          "Nodes per route counting the origin once (0: 4 for SkipPipe "
          "files, the scenario's own value otherwise).");
ABSL_FLAG(int, mb_per_data_node, 0,
          "Micro-batches each data node injects (0: 6 for SkipPipe files, "
          "the scenario's own value otherwise).");
ABSL_FLAG(int, max_swaps, -1, "Override the scenario's max swaps (-1: keep).");
ABSL_FLAG(int, max_jump, -1, "Override the scenario's max forward jump.");
ABSL_FLAG(double, balance_tolerance, -1,
          "Override the stage-visit tolerance (fraction of the mean).");
ABSL_FLAG(std::string, planner, "skippipe",
          "pipeline | noskip | random | skippipe | replay | all");
ABSL_FLAG(std::string, replay_key, "ca-paths",
          "Route set of the scenario that --planner=replay evaluates.");
ABSL_FLAG(int, budget_ms, 200, "Anytime budget of search planners (ms).");
ABSL_FLAG(int64_t, plan_seed, 1, "Seed of the randomised planners.");
ABSL_FLAG(int, candidates_per_stage, 12,
          "Nodes per stage a route search considers (0: all).");
ABSL_FLAG(std::string, format, "text", "text | json");
ABSL_FLAG(bool, link_contention, false,
          "Evaluate plans with links that carry one micro-batch at a time.");
ABSL_FLAG(bool, show_routes, false, "Text output: also print the routes.");

namespace skipswarm::scheduler {
namespace {

// --hybrid: pipeline-only vs SDP-only vs mixed (hybrid_compare.h).
int RunHybrid(const Scenario& scenario) {
  absl::StatusOr<HybridInputs> in = HybridInputsFromFlags();
  if (!in.ok()) {
    std::cerr << in.status().message() << "\n";
    return 2;
  }
  absl::StatusOr<HybridSwarm> swarm = SwarmFromScenario(scenario, *in);
  if (!swarm.ok()) {
    std::cerr << "hybrid: " << swarm.status().message() << "\n";
    return 1;
  }
  HybridOptions options;
  options.seed = static_cast<uint64_t>(absl::GetFlag(FLAGS_plan_seed));
  // The pipeline part's planner: --planner when it names one that plans.
  const std::string planner = absl::GetFlag(FLAGS_planner);
  if (planner != "all" && planner != "replay") options.planner = planner;
  if (absl::Status known = CreatePlanner(options.planner).status(); !known.ok()) {
    std::cerr << known.message() << "\n";
    return 2;
  }
  const std::vector<HybridRow> rows = CompareHybrid(*swarm, options, in->selection);
  std::cout << FormatHybridTable(*swarm, *in, rows);
  // A mixed plan always exists where a pipeline or a subnetwork does; a
  // selected single mode must be possible.
  for (const HybridRow& r : rows) {
    const bool required = in->selection != HybridSelection::kAll || r.label.rfind("mixed", 0) == 0;
    if (required && !r.status.ok()) return 1;
  }
  return 0;
}

int RunPlan(const std::vector<std::string>& args) {
  if (!args.empty()) {
    std::cerr << "plan takes no positional arguments\n";
    return 2;
  }
  std::string path = absl::GetFlag(FLAGS_scenario);
  const std::string skippipe = absl::GetFlag(FLAGS_skippipe_json);
  if (path.empty() == skippipe.empty()) {
    std::cerr << "give exactly one of --scenario or --skippipe_json\n";
    return 2;
  }
  if (path.empty()) path = skippipe;
  SkipPipeOptions sp;
  sp.forward_s = absl::GetFlag(FLAGS_forward_s);
  if (absl::GetFlag(FLAGS_path_length) > 0) {
    sp.path_length = absl::GetFlag(FLAGS_path_length);
  }
  if (absl::GetFlag(FLAGS_mb_per_data_node) > 0) {
    sp.mb_per_data_node = absl::GetFlag(FLAGS_mb_per_data_node);
  }
  absl::StatusOr<Scenario> scenario = LoadScenarioFile(path, sp);
  if (!scenario.ok()) {
    std::cerr << "bad scenario: " << scenario.status().message() << "\n";
    return 1;
  }
  if (!skippipe.empty() && scenario->name != "skippipe schedule.json") {
    std::cerr << path << " is not a SkipPipe schedule.json (no \"delays\")\n";
    return 1;
  }
  Workload& w = scenario->workload;
  if (absl::GetFlag(FLAGS_path_length) > 0) {
    w.path_length = absl::GetFlag(FLAGS_path_length);
  }
  if (absl::GetFlag(FLAGS_mb_per_data_node) > 0) {
    w.mb_per_data_node = absl::GetFlag(FLAGS_mb_per_data_node);
  }
  if (absl::GetFlag(FLAGS_max_swaps) >= 0) w.max_swaps = absl::GetFlag(FLAGS_max_swaps);
  if (absl::GetFlag(FLAGS_max_jump) >= 0) w.max_jump = absl::GetFlag(FLAGS_max_jump);
  if (absl::GetFlag(FLAGS_balance_tolerance) >= 0) {
    w.balance_tolerance = absl::GetFlag(FLAGS_balance_tolerance);
  }
  if (absl::Status st = ValidateWorkload(scenario->view, w); !st.ok()) {
    std::cerr << "bad workload: " << st.message() << "\n";
    return 1;
  }

  if (HybridRequested()) return RunHybrid(*scenario);

  ComparisonOptions options;
  const std::string planner = absl::GetFlag(FLAGS_planner);
  options.planners = planner == "all" ? PlannerNames()
                                      : std::vector<std::string>{planner};
  options.replay_key = absl::GetFlag(FLAGS_replay_key);
  options.seed = static_cast<uint64_t>(absl::GetFlag(FLAGS_plan_seed));
  options.budget = absl::Milliseconds(absl::GetFlag(FLAGS_budget_ms));
  options.candidates_per_stage = absl::GetFlag(FLAGS_candidates_per_stage);
  options.link_contention = absl::GetFlag(FLAGS_link_contention);
  std::unique_ptr<common::RealClock> clock = common::RealClock::Create();
  options.clock = clock.get();
  absl::StatusOr<Comparison> table = ComparePlanners(*scenario, options);
  if (!table.ok()) {
    std::cerr << "planning failed: " << table.status().message() << "\n";
    return 1;
  }
  bool all_valid = true;
  for (const PlannerResult& r : table->results) {
    all_valid = all_valid && r.status.ok() && r.validity.ok() &&
                !r.evaluation.deadlocked;
  }
  if (absl::GetFlag(FLAGS_format) == "json") {
    for (const PlannerResult& r : table->results) {
      std::cout << ResultJson(*scenario, *table, r) << "\n";
    }
  } else {
    std::cout << FormatTable(*scenario, *table);
    std::cout << "(plan seed " << options.seed << ", budget "
              << absl::GetFlag(FLAGS_budget_ms) << " ms)\n";
    if (absl::GetFlag(FLAGS_show_routes)) {
      for (const PlannerResult& r : table->results) {
        std::cout << "\n" << r.planner << ":\n";
        for (size_t i = 0; i < r.plan.routes.size(); ++i) {
          std::cout << "  " << RouteToString(scenario->view, r.plan.routes[i])
                    << "  prio " << r.plan.routes[i].priority << "  done "
                    << r.evaluation.route_finish_s[i] << " s\n";
        }
      }
    }
  }
  return all_valid ? 0 : 1;
}

}  // namespace

common::cli::Command PlanCommand() {
  common::cli::Command command;
  command.name = "plan";
  command.summary = "Plan micro-batch routes for a scenario and compare planners";
  command.usage =
      "skipswarm plan --scenario=FILE [--planner=skippipe|pipeline|noskip|"
      "random|replay|all]\n"
      "  FILE: SkipSwarm scenario JSON or SkipPipe schedule.json.\n"
      "  Acceptance table on SkipPipe's reference file:\n"
      "    skipswarm plan "
      "--scenario=scheduler/testdata/skippipe_gcp20_schedule.json "
      "--planner=all\n"
      "  Pipeline-only vs SDP-only vs mixed (per node SDP or pipeline hosting):\n"
      "    skipswarm plan --scenario=FILE --hybrid [--hybrid_mode=all|pipeline|sdp|hybrid]\n"
      "        [--hybrid_half_one_stage | --hybrid_one_stage_nodes=n1,n3] ...";
  command.flag_files = {"scheduler/plan_command.cc", kHybridFlagsFile};
  command.run = RunPlan;
  return command;
}

}  // namespace skipswarm::scheduler
