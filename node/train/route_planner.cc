#include "node/train/route_planner.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace skipswarm::node {

int DataNodeRank(const SwarmView& view, const PeerId& self) {
  std::vector<PeerId> data = view.Replicas(0);
  auto it = std::find(data.begin(), data.end(), self);
  return it == data.end() ? -1 : static_cast<int>(it - data.begin());
}

absl::StatusOr<std::vector<PlannedRoute>> InOrderPlanner::Plan(const PlanInput& input,
                                                               const SwarmView& view) {
  const int rank = std::max(0, DataNodeRank(view, input.self));
  std::vector<std::vector<PeerId>> replicas(input.num_stages);
  for (int s = 1; s < input.num_stages; ++s) {
    replicas[s] = view.Replicas(s);
    if (replicas[s].empty()) {
      return absl::UnavailableError(absl::StrCat("no live replica of stage ", s));
    }
  }
  std::vector<PlannedRoute> routes;
  for (int j = 0; j < input.mbs; ++j) {
    PlannedRoute r;
    r.index = j;
    r.hops.push_back({input.self, 0});
    for (int s = 1; s < input.num_stages; ++s) {
      const auto& reps = replicas[s];
      r.hops.push_back({reps[(j + rank) % reps.size()], s});
    }
    routes.push_back(std::move(r));
  }
  return routes;
}

}  // namespace skipswarm::node
