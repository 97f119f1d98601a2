#include "scheduler/compare.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include <nlohmann/json.hpp>

namespace skipswarm::scheduler {

absl::StatusOr<Comparison> ComparePlanners(const Scenario& scenario,
                                           const ComparisonOptions& options) {
  Comparison table;
  absl::StatusOr<LowerBound> lb =
      ComputeLowerBound(scenario.view, scenario.workload);
  if (!lb.ok()) return lb.status();
  table.lower_bound = *lb;
  for (const std::string& name : options.planners) {
    PlannerResult result;
    result.planner = name;
    absl::StatusOr<std::unique_ptr<Planner>> planner = CreatePlanner(name);
    if (!planner.ok()) return planner.status();
    PlanRequest request;
    request.view = &scenario.view;
    request.workload = scenario.workload;
    request.seed = options.seed;
    request.clock = options.clock;
    request.budget = options.budget;
    request.candidates_per_stage = options.candidates_per_stage;
    absl::StatusOr<Plan> replay;
    if (name == "replay") {
      result.planner = absl::StrCat("replay:", options.replay_key);
      replay = scenario.RouteSet(options.replay_key);
      if (!replay.ok()) {
        result.status = replay.status();
        table.results.push_back(std::move(result));
        continue;
      }
      request.replay = &*replay;
    }
    const absl::Duration start =
        options.clock ? options.clock->SteadyNow() : absl::ZeroDuration();
    absl::StatusOr<Plan> plan = (*planner)->MakePlan(request);
    if (options.clock) {
      result.planning_ms = absl::ToDoubleMilliseconds(
          options.clock->SteadyNow() - start);
    }
    if (!plan.ok()) {
      result.status = plan.status();
      table.results.push_back(std::move(result));
      continue;
    }
    result.plan = *std::move(plan);
    const Workload rules = RulesFor(**planner, request);
    result.validity = ValidatePlan(scenario.view, rules, result.plan,
                                   name == "replay" ? -1 : rules.path_length);
    absl::StatusOr<Evaluation> ev =
        Evaluate(scenario.view, result.plan, options.link_contention);
    if (!ev.ok()) {
      result.status = ev.status();
      table.results.push_back(std::move(result));
      continue;
    }
    result.evaluation = *std::move(ev);
    const auto& visits = result.evaluation.stage_visits;
    result.min_stage_visits = *std::min_element(visits.begin() + 1, visits.end());
    result.max_stage_visits = *std::max_element(visits.begin() + 1, visits.end());
    int working = 0;
    for (double u : result.evaluation.node_utilisation) {
      if (u > 0) {
        result.mean_utilisation += u;
        ++working;
      }
    }
    if (working > 0) result.mean_utilisation /= working;
    table.results.push_back(std::move(result));
  }
  return table;
}

std::string FormatTable(const Scenario& scenario, const Comparison& table) {
  const LowerBound& lb = table.lower_bound;
  std::string out = absl::StrFormat(
      "scenario: %s\n%d nodes, %d stages, %d data nodes, %d MBs per data "
      "node, path length %d\nlower bound: %.3f s (origin work %.3f, origin "
      "memory %.3f, spread work %.3f, origin tail %.3f)\n\n",
      scenario.name, scenario.view.num_nodes(), scenario.view.num_stages(),
      static_cast<int>(scenario.view.data_nodes().size()),
      scenario.workload.mb_per_data_node, scenario.workload.path_length,
      lb.seconds, lb.origin_work_s, lb.origin_memory_s, lb.spread_work_s,
      lb.origin_tail_s);
  absl::StrAppend(&out, absl::StrFormat(
      "%-18s %12s %8s %12s %6s %13s %6s %s\n", "planner", "iteration_s",
      "vs_lb", "planning_ms", "valid", "stage_visits", "util", "note"));
  for (const PlannerResult& r : table.results) {
    if (!r.status.ok()) {
      absl::StrAppend(&out, absl::StrFormat("%-18s  error: %s\n", r.planner,
                                            r.status.message()));
      continue;
    }
    const double t = r.evaluation.iteration_time_s;
    absl::StrAppend(
        &out,
        absl::StrFormat("%-18s %12.3f %8.3f %12.1f %6s %6d..%-6d %6.2f %s\n",
                        r.planner, t, t / lb.seconds, r.planning_ms,
                        r.validity.ok() ? "yes" : "NO", r.min_stage_visits,
                        r.max_stage_visits, r.mean_utilisation,
                        r.evaluation.deadlocked ? "DEADLOCK"
                        : r.validity.ok()       ? ""
                                                : std::string(r.validity.message())));
  }
  return out;
}

std::string ResultJson(const Scenario& scenario, const Comparison& table,
                       const PlannerResult& r) {
  nlohmann::json j;
  j["planner"] = r.planner;
  j["lower_bound_s"] = table.lower_bound.seconds;
  j["planning_ms"] = r.planning_ms;
  if (!r.status.ok()) {
    j["error"] = std::string(r.status.message());
    return j.dump();
  }
  const double t = r.evaluation.iteration_time_s;
  j["iteration_time_s"] = std::isfinite(t) ? nlohmann::json(t) : nlohmann::json();
  j["deadlocked"] = r.evaluation.deadlocked;
  j["valid"] = r.validity.ok();
  if (!r.validity.ok()) j["validity_error"] = std::string(r.validity.message());
  j["stage_visits"] = r.evaluation.stage_visits;
  nlohmann::json routes = nlohmann::json::array();
  for (const Route& route : r.plan.routes) {
    nlohmann::json e;
    e["mb"] = route.mb;
    e["origin"] = scenario.view.node(route.origin).name;
    std::vector<std::string> names;
    for (int v : route.nodes) names.push_back(scenario.view.node(v).name);
    e["nodes"] = names;
    e["priority"] = route.priority;
    e["release_s"] = route.release_s;
    routes.push_back(e);
  }
  j["routes"] = routes;
  return j.dump();
}

}  // namespace skipswarm::scheduler
