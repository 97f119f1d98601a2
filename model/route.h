// Routes: the order in which a micro-batch visits stages (docs/DESIGN.md §1).
//
//   std::vector<int> route = {0, 1, 3, 2, 5};    // skips 4, swaps 3 and 2
//   SS_RETURN_IF_ERROR(ValidateRoute(route, /*num_stages=*/6));
//   std::vector<int> r = RandomSkipRoute(6, /*skip_ratio=*/0.33, rng);
//
// A route lists stage 0 first (the data stage's start: embedding and its
// blocks), then distinct non-zero stages in visiting order; the return to
// stage 0 (final norm, head, loss) is implied. Stages not listed are skipped
// through the residual stream. The backward pass retraces the route.
//
// Thread rule: free functions, no shared state.
#ifndef SKIPSWARM_MODEL_ROUTE_H_
#define SKIPSWARM_MODEL_ROUTE_H_

#include <vector>

#include "absl/status/status.h"
#include "common/random.h"

namespace skipswarm::model {

// Optional policy limits; negative means unlimited. The scheduler owns the
// policy; DesignDefaults() are docs/DESIGN.md §1's (2 adjacent swaps, jumps <= 4).
struct RouteLimits {
  int max_swaps = -1;         // visits to a stage below the highest so far
  bool adjacent_swaps = false;  // a swap must go exactly one below the highest
  int max_forward_jump = -1;  // max (next - previous) when moving upwards
  static RouteLimits DesignDefaults() { return {2, true, 4}; }
};

// OK iff route[0] == 0, the rest are distinct stages in [1, num_stages), and
// the limits hold. Errors are InvalidArgument naming the problem.
absl::Status ValidateRoute(const std::vector<int>& route, int num_stages,
                           const RouteLimits& limits = {});

// {0, 1, ..., num_stages - 1}.
std::vector<int> FullRoute(int num_stages);

// Number of swaps in `route` (see RouteLimits::max_swaps).
int CountSwaps(const std::vector<int>& route);

// P = round((1 - skip_ratio) * num_stages), clamped to [1, num_stages]: the
// stages on a skip route, stage 0 included (skip_ratio clamped to [0, 1)).
int StagesPerRoute(int num_stages, double skip_ratio);

// An in-order route through P = StagesPerRoute(num_stages, skip_ratio) stages
// (at least stage 0): stage 0 plus P - 1 distinct non-zero stages drawn
// uniformly. skip_ratio is clamped to [0, 1).
std::vector<int> RandomSkipRoute(int num_stages, double skip_ratio, common::Random& rng);

// `num_routes` in-order routes of RandomSkipRoute's length whose visits are
// balanced over the non-zero stages (Note [Balanced skip routes]): across the
// set, any two non-zero stages' visit counts differ by at most one, so when
// num_routes * (P - 1) >= num_stages - 1 every stage is visited (and steps)
// in the iteration. Which stages get the extra visits is uniform. The
// skippipe planner balances visits the same way (docs/DESIGN.md §5).
std::vector<std::vector<int>> BalancedSkipRoutes(int num_stages, double skip_ratio,
                                                 int num_routes, common::Random& rng);

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_ROUTE_H_
