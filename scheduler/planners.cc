// The baseline planners (pipeline, random, replay) and the factory.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/random.h"
#include "scheduler/planner.h"
#include "scheduler/route_search.h"
#include "scheduler/skippipe_planner.h"

namespace skipswarm::scheduler {
namespace {

absl::Status CheckRequest(const PlanRequest& request, const Workload& rules) {
  if (request.view == nullptr) {
    return absl::InvalidArgumentError("PlanRequest.view is null");
  }
  return ValidateWorkload(*request.view, rules);
}

class PipelinePlanner : public Planner {
 public:
  std::string name() const override { return "pipeline"; }
  int PathLength(const PlanRequest& request) const override {
    return request.view->num_stages();
  }
  int MaxSwaps(const PlanRequest&) const override { return 0; }

  absl::StatusOr<Plan> MakePlan(const PlanRequest& request) override {
    const Workload rules = RulesFor(*this, request);
    if (absl::Status st = CheckRequest(request, rules); !st.ok()) return st;
    const TopologyView& view = *request.view;
    int pipelines = static_cast<int>(view.data_nodes().size());
    for (int s = 1; s < view.num_stages(); ++s) {
      pipelines = std::min(pipelines,
                           static_cast<int>(view.stage_nodes(s).size()));
    }
    // Greedy network-aware grouping: repeatedly take the fastest full
    // in-order pipeline left among unused nodes and unused data nodes.
    RouteSearcher searcher(view, rules);
    std::vector<double> banned(view.num_nodes(), 0);
    std::vector<std::vector<int>> chosen;
    for (int p = 0; p < pipelines; ++p) {
      std::optional<FoundRoute> best;
      for (int o : view.data_nodes()) {
        if (std::isinf(banned[o])) continue;
        RouteSearcher::Query q;
        q.node_penalty = &banned;
        q.path_length = rules.path_length;
        q.max_swaps = 0;
        std::optional<FoundRoute> r = searcher.Best(o, q);
        if (r && (!best || r->latency_s < best->latency_s)) best = r;
      }
      if (!best) break;
      for (int v : best->nodes) banned[v] = std::numeric_limits<double>::infinity();
      chosen.push_back(best->nodes);
    }
    if (chosen.empty()) {
      return absl::FailedPreconditionError("no full pipeline can be formed");
    }
    // All D x M micro-batches, spread evenly over the pipelines.
    const int total =
        static_cast<int>(view.data_nodes().size()) * rules.mb_per_data_node;
    Plan plan;
    plan.planner = name();
    const int k = static_cast<int>(chosen.size());
    for (int p = 0; p < k; ++p) {
      const int share = total / k + (p < total % k ? 1 : 0);
      for (int j = 0; j < share; ++j) {
        Route r;
        r.mb = static_cast<int>(plan.routes.size());
        r.origin = chosen[p].front();
        r.nodes = chosen[p];
        plan.routes.push_back(std::move(r));
      }
    }
    return plan;
  }
};

class RandomPlanner : public Planner {
 public:
  std::string name() const override { return "random"; }
  absl::StatusOr<Plan> MakePlan(const PlanRequest& request) override {
    const Workload rules = RulesFor(*this, request);
    if (absl::Status st = CheckRequest(request, rules); !st.ok()) return st;
    const TopologyView& view = *request.view;
    common::Random rng = common::Random(request.seed).Fork("random-planner");
    const int num_stages = view.num_stages();
    const int k = rules.path_length - 1;
    std::vector<int> stage_count(num_stages, 0);
    std::vector<int> node_count(view.num_nodes(), 0);
    Plan plan;
    plan.planner = name();
    for (int j = 0; j < rules.mb_per_data_node; ++j) {
      for (int o : view.data_nodes()) {
        // The k least-visited stages (ties random), in a random valid order.
        std::vector<int> stages(num_stages - 1);
        std::iota(stages.begin(), stages.end(), 1);
        std::vector<int> chosen;
        for (int attempt = 0; attempt < 64 && chosen.empty(); ++attempt) {
          rng.Shuffle(stages);
          std::stable_sort(stages.begin(), stages.end(), [&](int a, int b) {
            return stage_count[a] < stage_count[b];
          });
          std::vector<int> pick(stages.begin(), stages.begin() + k);
          // Late attempts also draw from beyond the least-visited ones.
          if (attempt >= 32) {
            std::vector<int> all = stages;
            rng.Shuffle(all);
            pick.assign(all.begin(), all.begin() + k);
          }
          std::sort(pick.begin(), pick.end());
          for (size_t i = 0; i + 1 < pick.size(); ++i) {
            if (pick[i + 1] == pick[i] + 1 &&
                rng.Bernoulli(0.5)) {  // random adjacent swap
              std::vector<int> swapped = pick;
              std::swap(swapped[i], swapped[i + 1]);
              if (StagesObeyRules(swapped, rules.max_swaps, rules.max_jump)) {
                pick = swapped;
                ++i;
              }
            }
          }
          if (StagesObeyRules(pick, rules.max_swaps, rules.max_jump)) {
            chosen = pick;
          }
        }
        if (chosen.empty()) {
          return absl::FailedPreconditionError(
              "random planner found no valid stage sequence");
        }
        Route r;
        r.mb = static_cast<int>(plan.routes.size());
        r.origin = o;
        r.nodes.push_back(o);
        for (int s : chosen) {
          std::vector<int> replicas = view.stage_nodes(s);
          rng.Shuffle(replicas);
          int best = -1;
          for (int v : replicas) {
            if (!std::isfinite(view.hop_s(r.nodes.back(), v))) continue;
            if (best < 0 || node_count[v] < node_count[best]) best = v;
          }
          if (best < 0) best = replicas.front();
          ++node_count[best];
          ++stage_count[s];
          r.nodes.push_back(best);
        }
        r.nodes.push_back(o);
        plan.routes.push_back(std::move(r));
      }
    }
    return plan;
  }
};

class ReplayPlanner : public Planner {
 public:
  std::string name() const override { return "replay"; }
  absl::StatusOr<Plan> MakePlan(const PlanRequest& request) override {
    if (request.replay == nullptr) {
      return absl::InvalidArgumentError(
          "replay needs routes (a route set from the scenario)");
    }
    Plan plan = *request.replay;
    if (plan.planner.empty()) plan.planner = name();
    return plan;
  }
};

}  // namespace

std::vector<std::string> PlannerNames() {
  return {"pipeline", "noskip", "random", "skippipe", "replay"};
}

absl::StatusOr<std::unique_ptr<Planner>> CreatePlanner(absl::string_view name) {
  if (name == "pipeline") return std::make_unique<PipelinePlanner>();
  if (name == "noskip") return NewSkipPipePlanner(/*full_routes=*/true);
  if (name == "random") return std::make_unique<RandomPlanner>();
  if (name == "skippipe") return NewSkipPipePlanner(/*full_routes=*/false);
  if (name == "replay") return std::make_unique<ReplayPlanner>();
  return absl::InvalidArgumentError(
      absl::StrCat("unknown planner '", name,
                   "'; known: ", absl::StrJoin(PlannerNames(), ", ")));
}

Workload RulesFor(const Planner& planner, const PlanRequest& request) {
  Workload rules = request.workload;
  if (request.view != nullptr) {
    rules.path_length = planner.PathLength(request);
    rules.max_swaps = planner.MaxSwaps(request);
  }
  return rules;
}

}  // namespace skipswarm::scheduler
