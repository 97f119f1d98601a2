#include "node/train/route_planner.h"

#include <glog/logging.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace skipswarm::node {

absl::Status UsableForPlanning(const PeerInfo& p, int num_stages) {
  if (p.stages.empty()) return absl::InvalidArgumentError("hosts no stage");
  for (int s : p.stages) {
    if (s < 0 || s >= num_stages) {
      return absl::InvalidArgumentError(
          absl::StrCat("stage ", s, " is outside the model's 0..", num_stages - 1));
    }
  }
  if (p.memory_slots < 1 || p.memory_slots > kMaxMemorySlots) {
    return absl::InvalidArgumentError(absl::StrCat("memory_slots ", p.memory_slots,
                                                   " is outside 1..", kMaxMemorySlots));
  }
  return absl::OkStatus();
}

void RefusedRecords::Refuse(const PeerInfo& p, std::optional<uint64_t> incarnation,
                            const absl::Status& why) {
  {
    absl::MutexLock lock(&mu_);
    auto it = refused_.find(p.id);
    if (it != refused_.end() && it->second == incarnation) return;  // this version again
    if (it == refused_.end() && refused_.size() >= kMaxRememberedRefusals) refused_.clear();
    refused_[p.id] = incarnation;
    ++count_;
  }
  LOG(WARNING) << "planning leaves out member " << p.id.ShortString() << " (record incarnation "
               << (incarnation ? absl::StrCat(*incarnation) : std::string("unknown"))
               << "): " << why;
}

uint64_t RefusedRecords::count() const {
  absl::MutexLock lock(&mu_);
  return count_;
}

std::vector<PeerInfo> PlanningMembers(const SwarmView& view, int num_stages,
                                      RefusedRecords* refused) {
  std::vector<PeerInfo> out;
  for (PeerInfo& m : view.Members()) {
    if (!view.IsAlive(m.id)) continue;  // a tombstone: never checked, never planned
    if (absl::Status usable = UsableForPlanning(m, num_stages); !usable.ok()) {
      if (refused != nullptr) refused->Refuse(m, view.Incarnation(m.id), usable);
      continue;
    }
    out.push_back(std::move(m));
  }
  return out;
}

int DataNodeRank(const SwarmView& view, const PeerId& self) {
  std::vector<PeerId> data = view.Replicas(0);
  auto it = std::find(data.begin(), data.end(), self);
  return it == data.end() ? -1 : static_cast<int>(it - data.begin());
}

DataOrder DataOrderOf(const SwarmView& view, const PeerId& self) {
  DataOrder o;
  int subnetworks = 0;
  for (const PeerInfo& p : view.Members()) {
    if (std::find(p.stages.begin(), p.stages.end(), 0) == p.stages.end()) continue;
    int& kind = p.subnetwork ? subnetworks : o.pipeline_data;
    if (p.id == self) o.rank = kind;
    ++kind;
    ++o.num_data;
  }
  return o;
}

absl::StatusOr<std::vector<PlannedRoute>> InOrderPlanner::Plan(const PlanInput& input,
                                                               const SwarmView& swarm) {
  const PipelineHostsView view(swarm);  // never through a subnetwork member
  const int rank = std::max(0, DataNodeRank(view, input.self));
  std::vector<std::vector<PeerId>> replicas(input.num_stages);
  // Note [Planning members]: replicas in the view's order, from the usable
  // live members only.
  std::vector<PeerId> usable;
  for (const PeerInfo& p : PlanningMembers(view, input.num_stages, &refused_)) {
    usable.push_back(p.id);
  }
  for (int s = 1; s < input.num_stages; ++s) {
    for (const PeerId& id : view.Replicas(s)) {
      if (std::find(usable.begin(), usable.end(), id) != usable.end()) {
        replicas[s].push_back(id);
      }
    }
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
