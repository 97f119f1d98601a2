#include "model/route.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace skipswarm::model {

absl::Status ValidateRoute(const std::vector<int>& route, int num_stages,
                           const RouteLimits& limits) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat("route [", absl::StrJoin(route, ","), "]: ", why));
  };
  if (route.empty() || route[0] != 0) return bad("must start at stage 0");
  std::vector<bool> seen(num_stages, false);
  int highest = 0, swaps = 0;
  for (size_t i = 1; i < route.size(); ++i) {
    const int s = route[i];
    if (s <= 0 || s >= num_stages) {
      return bad(absl::StrCat("stage ", s, " is not in [1, ", num_stages, ")"));
    }
    if (seen[s]) return bad(absl::StrCat("stage ", s, " visited twice"));
    seen[s] = true;
    if (s < highest) {
      ++swaps;
      if (limits.adjacent_swaps && highest - s != 1) {
        return bad(absl::StrCat("swap to stage ", s, " is not adjacent to ", highest));
      }
    } else if (limits.max_forward_jump >= 0 && s - route[i - 1] > limits.max_forward_jump) {
      return bad(absl::StrCat("jump ", route[i - 1], "->", s, " exceeds ",
                              limits.max_forward_jump));
    }
    highest = std::max(highest, s);
  }
  if (limits.max_swaps >= 0 && swaps > limits.max_swaps) {
    return bad(absl::StrCat(swaps, " swaps exceed the limit of ", limits.max_swaps));
  }
  return absl::OkStatus();
}

std::vector<int> FullRoute(int num_stages) {
  std::vector<int> r(num_stages);
  for (int i = 0; i < num_stages; ++i) r[i] = i;
  return r;
}

int CountSwaps(const std::vector<int>& route) {
  int highest = 0, swaps = 0;
  for (int s : route) {
    if (s < highest) ++swaps;
    highest = std::max(highest, s);
  }
  return swaps;
}

int StagesPerRoute(int num_stages, double skip_ratio) {
  skip_ratio = std::clamp(skip_ratio, 0.0, 0.999);
  const int p = static_cast<int>(std::lround((1.0 - skip_ratio) * num_stages));
  return std::clamp(p, 1, num_stages);
}

std::vector<int> RandomSkipRoute(int num_stages, double skip_ratio, common::Random& rng) {
  const int p = StagesPerRoute(num_stages, skip_ratio);
  std::vector<int> others;
  for (int s = 1; s < num_stages; ++s) others.push_back(s);
  rng.Shuffle(others);
  others.resize(p - 1);
  std::sort(others.begin(), others.end());
  std::vector<int> route = {0};
  route.insert(route.end(), others.begin(), others.end());
  return route;
}

// Note [Balanced skip routes]: with independent routes (RandomSkipRoute per
// MB) a non-zero stage of the default run (2 MBs, 3 of 5 stages each) is
// missed by both MBs in (2/5)^2 = 16% of iterations, and a stage nobody
// visited takes no optimiser step (Note [Visit weighting]); over 2,000
// iterations each non-zero stage lost ~320 of its 2,000 AdamW updates while
// seeing the same 60% of the tokens. Dealing each route the P - 1 stages
// least visited so far in the iteration (ties broken by a fresh shuffle)
// keeps the visit counts within one of each other, so every stage steps on
// every iteration whenever the iteration has enough visits to go round. Each
// route is still uniform over the (P-1)-subsets and in order; only the
// routes of one iteration are coupled. Measured (model/README.md): the plain
// validation loss moved by -0.2 to +0.75% against independent routes over
// 2,000 iterations (noise-sized), the depth-calibrated final loss was 0.5%
// lower; train-ref balances by default, as the swarm's planner does.
std::vector<std::vector<int>> BalancedSkipRoutes(int num_stages, double skip_ratio,
                                                 int num_routes, common::Random& rng) {
  const int p = StagesPerRoute(num_stages, skip_ratio);
  std::vector<int> visits(num_stages, 0);
  std::vector<std::vector<int>> routes;
  for (int j = 0; j < num_routes; ++j) {
    std::vector<int> others;
    for (int s = 1; s < num_stages; ++s) others.push_back(s);
    rng.Shuffle(others);
    std::stable_sort(others.begin(), others.end(),
                     [&visits](int a, int b) { return visits[a] < visits[b]; });
    others.resize(p - 1);
    std::sort(others.begin(), others.end());
    std::vector<int> route = {0};
    for (int s : others) {
      ++visits[s];
      route.push_back(s);
    }
    routes.push_back(std::move(route));
  }
  return routes;
}

}  // namespace skipswarm::model
