#include "node/stage/route_repair.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace skipswarm::node {
namespace {

bool Contains(const std::vector<common::NodeId>& v, const common::NodeId& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

}  // namespace

absl::StatusOr<std::vector<RouteHop>> ReplicaRouteRepairer::Repair(const RepairRequest& r,
                                                                   const SwarmView& swarm) {
  const PipelineHostsView view(swarm);  // never through a subnetwork member
  const size_t hop = static_cast<size_t>(r.holder) + 1;
  if (r.holder < 0 || hop >= r.route.size()) {
    return absl::AbortedError("the failed hop is the origin: nothing to re-route");
  }
  const int stage = r.route[hop].stage;
  std::vector<common::NodeId> candidates;
  for (const common::NodeId& p : view.Replicas(stage)) {
    if (!Contains(r.failed, p)) candidates.push_back(p);
  }
  std::vector<RouteHop> fixed = r.route;
  if (!candidates.empty()) {
    fixed[hop].node = candidates[(r.mb + r.iteration) % candidates.size()];
    return fixed;
  }
  if (!r.allow_shorter) {
    return absl::AbortedError(absl::StrCat("no live replica of stage ", stage, " left"));
  }
  fixed.erase(fixed.begin() + hop);
  return fixed;
}

absl::Status CheckRepair(const RepairRequest& r, const SwarmView& view,
                         const std::vector<RouteHop>& fixed) {
  const size_t keep = static_cast<size_t>(r.holder) + 1;
  if (fixed.size() < keep || fixed.size() > r.route.size()) {
    return absl::InternalError(absl::StrCat("repaired route has ", fixed.size(), " hops"));
  }
  if (fixed.size() < r.route.size() && !r.allow_shorter) {
    return absl::AbortedError("repair would skip a stage; the skip budget does not allow it");
  }
  for (size_t i = 0; i < keep; ++i) {
    if (fixed[i].node != r.route[i].node || fixed[i].stage != r.route[i].stage) {
      return absl::InternalError("repair changed the hops already run");
    }
  }
  for (size_t i = keep; i < fixed.size(); ++i) {
    if (Contains(r.failed, fixed[i].node) || !view.IsAlive(fixed[i].node)) {
      return absl::AbortedError(
          absl::StrCat("repair routes through failed peer ", fixed[i].node.ShortString()));
    }
  }
  return absl::OkStatus();
}

}  // namespace skipswarm::node
