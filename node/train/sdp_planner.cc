#include "node/train/sdp_planner.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace skipswarm::node {

std::string SdpPlanner::name() const { return absl::StrCat("sdp-", model::SdpModeName(mode_)); }

absl::StatusOr<std::vector<PlannedRoute>> SdpPlanner::Plan(const PlanInput& input,
                                                           const SwarmView& view) {
  // Note [SDP worker order]. In a swarm that marks its subnetwork members
  // (gossip records) only they are workers, after the pipeline data nodes'
  // slots (Note [Mixed data order]); an unmarked one (a static list) has
  // only workers.
  const std::vector<PeerInfo> members = view.Members();
  const bool marked = std::any_of(members.begin(), members.end(),
                                  [](const PeerInfo& p) { return p.subnetwork; });
  const int first_slot = marked ? DataOrderOf(view, input.self).pipeline_data * input.mbs : 0;
  std::vector<std::pair<std::vector<int>, common::NodeId>> workers;
  for (const PeerInfo& p : PlanningMembers(view, input.num_stages, &refused_)) {
    if (marked && !p.subnetwork) continue;
    std::vector<int> stages = p.stages;
    std::sort(stages.begin(), stages.end());
    stages.erase(std::unique(stages.begin(), stages.end()), stages.end());
    if (stages.empty() || stages.front() != 0) continue;
    workers.emplace_back(std::move(stages), p.id);
  }
  std::sort(workers.begin(), workers.end());
  auto me = std::find_if(workers.begin(), workers.end(),
                         [&](const auto& w) { return w.second == input.self; });
  if (me == workers.end()) {
    return absl::UnavailableError(
        absl::StrCat(input.self.ShortString(), " is not a live data node of the view"));
  }
  const int rank = static_cast<int>(me - workers.begin());
  std::vector<int> stages = me->first;
  if (mode_ == model::SdpMode::kBackward) {
    stages.clear();
    for (int s = 0; s < input.num_stages; ++s) stages.push_back(s);
  }
  std::vector<PlannedRoute> routes;
  for (int j = 0; j < input.mbs; ++j) {
    PlannedRoute r;
    r.index = j;
    r.data_slot = first_slot + rank * input.mbs + j;
    r.priority = j;
    for (int s : stages) r.hops.push_back({input.self, s});
    routes.push_back(std::move(r));
  }
  return routes;
}

}  // namespace skipswarm::node
