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

std::vector<int> RandomSkipRoute(int num_stages, double skip_ratio, common::Random& rng) {
  skip_ratio = std::clamp(skip_ratio, 0.0, 0.999);
  int p = static_cast<int>(std::lround((1.0 - skip_ratio) * num_stages));
  p = std::clamp(p, 1, num_stages);
  std::vector<int> others;
  for (int s = 1; s < num_stages; ++s) others.push_back(s);
  rng.Shuffle(others);
  others.resize(p - 1);
  std::sort(others.begin(), others.end());
  std::vector<int> route = {0};
  route.insert(route.end(), others.begin(), others.end());
  return route;
}

}  // namespace skipswarm::model
