// Scale targets of the planner (one core):
//   plan 100 nodes x 8 stages x 16 MBs per data node   <= 100 ms
//   plan 1000 nodes x 16 stages                         <= 2 s
//   re-route one in-flight MB                           <= 1 ms
// Run: bazel run -c opt //scheduler:scheduler_benchmark
// "greedy" variants stop after the construction phase (max_evaluations =
// 0); the others also run the local search within the stated budget.
#include <memory>

#include "benchmark/benchmark.h"
#include "common/real_clock.h"
#include "scheduler/evaluator.h"
#include "scheduler/planner.h"
#include "scheduler/replan.h"
#include "scheduler/synthetic.h"

namespace skipswarm::scheduler {
namespace {

const Scenario& Swarm(int nodes, int stages) {
  static auto* cache = new std::map<std::pair<int, int>, Scenario>();
  auto key = std::make_pair(nodes, stages);
  auto it = cache->find(key);
  if (it == cache->end()) {
    SyntheticOptions o;
    o.num_nodes = nodes;
    o.num_stages = stages;
    o.mb_per_data_node = 16;
    it = cache->emplace(key, *MakeSyntheticScenario(o)).first;
  }
  return it->second;
}

void Plan(benchmark::State& state, const char* planner_name, int budget_ms) {
  const Scenario& sc = Swarm(state.range(0), state.range(1));
  std::unique_ptr<common::RealClock> clock = common::RealClock::Create();
  double iteration = 0;
  for (auto _ : state) {
    auto planner = *CreatePlanner(planner_name);
    PlanRequest request;
    request.view = &sc.view;
    request.workload = sc.workload;
    request.clock = clock.get();
    request.budget = absl::Milliseconds(budget_ms);
    if (budget_ms == 0) request.max_evaluations = 0;
    auto plan = planner->MakePlan(request);
    if (!plan.ok()) {
      state.SkipWithError(std::string(plan.status().message()).c_str());
      return;
    }
    iteration = EvaluateTime(sc.view, *plan, nullptr);
  }
  auto lb = ComputeLowerBound(sc.view, sc.workload);
  state.counters["iteration_s"] = iteration;
  state.counters["vs_lower_bound"] = lb.ok() ? iteration / lb->seconds : 0;
  state.counters["mbs"] =
      static_cast<double>(sc.view.data_nodes().size()) *
      sc.workload.mb_per_data_node;
}

void BM_SkipPipeGreedy(benchmark::State& state) { Plan(state, "skippipe", 0); }
void BM_SkipPipe100ms(benchmark::State& state) { Plan(state, "skippipe", 100); }
void BM_Pipeline(benchmark::State& state) { Plan(state, "pipeline", 0); }

BENCHMARK(BM_SkipPipeGreedy)
    ->Args({100, 8})
    ->Args({1000, 16})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK(BM_SkipPipe100ms)
    ->Args({100, 8})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK(BM_Pipeline)->Args({100, 8})->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_SkipPipe2s(benchmark::State& state) { Plan(state, "skippipe", 2000); }
BENCHMARK(BM_SkipPipe2s)->Args({100, 8})->Unit(benchmark::kMillisecond)->Iterations(1);

void BM_LowerBound(benchmark::State& state) {
  const Scenario& sc = Swarm(state.range(0), state.range(1));
  for (auto _ : state) {
    benchmark::DoNotOptimize(ComputeLowerBound(sc.view, sc.workload));
  }
}
BENCHMARK(BM_LowerBound)->Args({100, 8})->Args({1000, 16})->Unit(benchmark::kMillisecond);

void BM_Evaluate(benchmark::State& state) {
  const Scenario& sc = Swarm(state.range(0), state.range(1));
  auto plan = (*CreatePlanner("random"))->MakePlan(
      PlanRequest{&sc.view, sc.workload});
  IterationSimulator sim;
  for (auto _ : state) {
    benchmark::DoNotOptimize(sim.Run(sc.view, *plan, nullptr));
  }
}
BENCHMARK(BM_Evaluate)->Args({100, 8})->Args({1000, 16})->Unit(benchmark::kMicrosecond);

void BM_RerouteInFlight(benchmark::State& state) {
  const Scenario& sc = Swarm(state.range(0), state.range(1));
  auto plan = (*CreatePlanner("random"))->MakePlan(
      PlanRequest{&sc.view, sc.workload});
  const Route& route = plan->routes[0];
  const int hop = 1;
  const int dead = route.nodes[hop + 1];
  for (auto _ : state) {
    auto fixed = RerouteInFlight(sc.view, sc.workload, route, hop, dead);
    benchmark::DoNotOptimize(fixed);
  }
}
BENCHMARK(BM_RerouteInFlight)
    ->Args({100, 8})
    ->Args({1000, 16})
    ->Unit(benchmark::kMicrosecond);

void BM_ReplanWithoutNode(benchmark::State& state) {
  const Scenario& sc = Swarm(state.range(0), state.range(1));
  auto plan = (*CreatePlanner("random"))->MakePlan(
      PlanRequest{&sc.view, sc.workload});
  const int dead = plan->routes[0].nodes[1];
  for (auto _ : state) {
    auto r = ReplanWithoutNode(sc.view, sc.workload, *plan, dead);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_ReplanWithoutNode)
    ->Args({1000, 16})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace skipswarm::scheduler
