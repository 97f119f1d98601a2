// Route planners behind one interface, chosen by name (docs/DESIGN.md §5).
//
//   SS_ASSIGN_OR_RETURN(std::unique_ptr<Planner> planner,
//                       CreatePlanner("skippipe"));
//   PlanRequest request;
//   request.view = &view;                  // must outlive the call
//   request.workload = workload;           // M, P, swap/jump/balance rules
//   request.seed = 42;
//   request.clock = &clock;                // for the time budget; may be null
//   request.budget = absl::Milliseconds(200);
//   SS_ASSIGN_OR_RETURN(Plan plan, planner->MakePlan(request));
//
// Planners:
//  * pipeline - DT-FM-style baseline: min over stages of the replica count
//    fixed full in-order pipelines, one replica of every stage each, formed
//    greedily (the fastest remaining pipeline first, over the unused nodes);
//    all D x M micro-batches are spread evenly over the pipelines, whose
//    data node injects them. Routes visit every stage (P = S).
//  * noskip   - the skippipe planner restricted to full in-order routes
//    (P = S, no swaps): what skipping alone buys.
//  * random   - network-oblivious: each MB visits the P-1 least-visited
//    stages (ties random) in random valid order, on the least-loaded
//    replica. Respects load and the balance rule, ignores the network.
//  * skippipe - ours; see skippipe_planner.h.
//  * replay   - returns `request.replay` (routes given from outside).
// Every planner returns a plan that passes ValidatePlan for its own path
// length (S for pipeline/noskip), or an error saying why it could not.
//
// Determinism: the same view, workload, options and seed give the same
// plan, provided the skippipe search converges before its time budget (it
// stops after `stall_evaluations` evaluations without improvement or
// `max_evaluations`); a budget that cuts the search short returns the best
// plan so far, which then depends on machine speed.
//
// Thread rule: a Planner object is used by one thread at a time; distinct
// planners may run concurrently on the same view.
#ifndef SKIPSWARM_SCHEDULER_PLANNER_H_
#define SKIPSWARM_SCHEDULER_PLANNER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "scheduler/route.h"
#include "scheduler/topology.h"

namespace skipswarm::scheduler {

struct PlanRequest {
  const TopologyView* view = nullptr;
  Workload workload;
  uint64_t seed = 1;
  // Anytime budget for search-based planners. With a null clock there is
  // no deadline: the search stops on its evaluation limits only.
  common::Clock* clock = nullptr;
  absl::Duration budget = absl::Milliseconds(200);
  int max_evaluations = 20000;
  int stall_evaluations = 1500;
  // Consider at most this many nodes per stage when searching one route
  // (the cheapest for the MB's origin); 0 = all. Speed knob for big swarms.
  int candidates_per_stage = 12;
  // For "replay".
  const Plan* replay = nullptr;
};

class Planner {
 public:
  virtual ~Planner() = default;
  virtual std::string name() const = 0;
  // Path length the planner's routes have for this request (S or P).
  virtual int PathLength(const PlanRequest& request) const {
    return request.workload.path_length;
  }
  // Max swaps its routes may use (0 for in-order planners).
  virtual int MaxSwaps(const PlanRequest& request) const {
    return request.workload.max_swaps;
  }
  virtual absl::StatusOr<Plan> MakePlan(const PlanRequest& request) = 0;
};

// "pipeline", "noskip", "random", "skippipe", "replay".
std::vector<std::string> PlannerNames();
absl::StatusOr<std::unique_ptr<Planner>> CreatePlanner(absl::string_view name);

// The workload a planner's routes are checked against (path length and
// swaps adjusted for in-order planners).
Workload RulesFor(const Planner& planner, const PlanRequest& request);

}  // namespace skipswarm::scheduler

#endif  // SKIPSWARM_SCHEDULER_PLANNER_H_
