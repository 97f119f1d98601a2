#include "node/train/plan_cache.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "common/status_macros.h"
#include "scheduler/replan.h"
#include "scheduler/route_search.h"

namespace skipswarm::node {

PlanCache::PlanCache(std::function<std::string()> costs_key, common::Clock* wall_clock)
    : costs_key_(std::move(costs_key)), wall_clock_(wall_clock) {}

const SharedPlan* PlanCache::Find(const std::string& key) const {
  auto it = plans_.find(key);
  return it == plans_.end() ? nullptr : it->second.get();
}

const SharedPlan* PlanCache::Insert(const std::string& key, SharedPlan plan) {
  std::unique_ptr<SharedPlan>& slot = plans_[key];
  slot = std::make_unique<SharedPlan>(std::move(plan));
  latest_ = slot.get();
  return latest_;
}

absl::StatusOr<scheduler::Plan> ReplanForLeavers(const SharedPlan& old,
                                                 const std::vector<PeerInfo>& now_members,
                                                 const scheduler::TopologyView& now_view,
                                                 const scheduler::Workload& workload) {
  absl::flat_hash_map<common::NodeId, int> now_index;
  for (size_t i = 0; i < now_members.size(); ++i) {
    now_index[now_members[i].id] = static_cast<int>(i);
  }
  absl::flat_hash_map<common::NodeId, int> old_index;
  for (size_t i = 0; i < old.members.size(); ++i) {
    old_index[old.members[i].id] = static_cast<int>(i);
  }
  for (const PeerInfo& m : now_members) {
    if (!old_index.contains(m.id)) {
      return absl::FailedPreconditionError("a member joined: full re-plan");
    }
  }
  // Old view index -> new view index, -1 for a departed member.
  std::vector<int> moved(old.members.size(), -1);
  for (size_t i = 0; i < old.members.size(); ++i) {
    auto it = now_index.find(old.members[i].id);
    if (it != now_index.end()) moved[i] = it->second;
  }
  scheduler::TopologyView view = old.view;
  scheduler::Plan plan = old.plan;
  for (int i = 0; i < view.num_nodes(); ++i) {
    if (moved[i] >= 0) continue;
    SS_ASSIGN_OR_RETURN(scheduler::ReplanResult r,
                        scheduler::ReplanWithoutNode(view, workload, plan, i));
    view = std::move(r.view);
    plan = std::move(r.plan);
  }
  scheduler::RouteSearcher searcher(now_view, workload);
  std::vector<scheduler::Route> kept;
  for (scheduler::Route& r : plan.routes) {
    for (int& v : r.nodes) v = moved[v];
    r.origin = r.nodes.front();
    if (r.origin < 0) continue;
    if (std::count(r.nodes.begin(), r.nodes.end(), -1)) {
      scheduler::RouteSearcher::Query q;
      q.path_length = static_cast<int>(r.nodes.size()) - 1;
      std::optional<scheduler::FoundRoute> found = searcher.Best(r.origin, q);
      if (!found) continue;
      r.nodes = found->nodes;
    }
    kept.push_back(r);
  }
  plan.routes = std::move(kept);
  return plan;
}

}  // namespace skipswarm::node
