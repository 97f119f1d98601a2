#include "node/train/scheduler_repairer.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "node/train/scheduler_planner.h"
#include "scheduler/replan.h"
#include "scheduler/topology.h"

namespace skipswarm::node {
namespace {

uint64_t Mix(uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// In [0, 1), fixed for (iteration, mb, node) in every process (absl::Hash
// is seeded per process): the tie-break of the header comment.
double Jitter(uint64_t iteration, uint64_t mb, const common::NodeId& id) {
  uint64_t h = Mix(iteration * 0x100000001b3ULL ^ Mix(mb));
  for (unsigned char c : id.Bytes()) h = Mix(h ^ c);
  return static_cast<double>(h >> 11) / 9007199254740992.0;
}

}  // namespace

absl::StatusOr<std::vector<RouteHop>> SchedulerRouteRepairer::Repair(const RepairRequest& r,
                                                                     const SwarmView& swarm) {
  const PipelineHostsView view(swarm);  // never through a subnetwork member
  // Note [Planning members] (route_planner.h): an unusable record is
  // refused (a stage outside the model left the topology with an empty
  // stage and failed every repair while gossip kept the record). Dead
  // members with usable records stay: the failed hop is often one, and a
  // stage's last node is its placeholder; both are removed from the
  // topology below and never chosen.
  const int num_stages_known =
      options_.num_stages > 0 ? options_.num_stages : std::numeric_limits<int>::max();
  std::vector<PeerInfo> members;
  for (PeerInfo& m : view.Members()) {
    if (absl::Status usable = UsableForPlanning(m, num_stages_known); !usable.ok()) {
      if (view.IsAlive(m.id)) refused_.Refuse(m, view.Incarnation(m.id), usable);
      continue;
    }
    members.push_back(std::move(m));
  }
  // The planner's compute and hop costs (measured, or from outside).
  const std::vector<double> speeds = PlanningSpeeds(members, options_.costs);
  std::vector<scheduler::NodeSpec> nodes;
  int num_stages = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    const PeerInfo& m = members[i];
    if (m.stages.size() != 1) return fallback_.Repair(r, view);
    scheduler::NodeSpec n;
    n.name = m.id.ShortString();
    n.id = m.id;
    n.stage = m.stages[0];
    n.sec_per_layer_sample = speeds[i] * (1 + 1e-3 * Jitter(r.iteration, r.mb, m.id));
    n.memory_slots = std::max(1, m.memory_slots);
    num_stages = std::max(num_stages, n.stage + 1);
    nodes.push_back(std::move(n));
  }
  auto index = [&](const common::NodeId& id) {
    for (size_t i = 0; i < members.size(); ++i) {
      if (members[i].id == id) return static_cast<int>(i);
    }
    return -1;
  };
  const size_t hop = static_cast<size_t>(r.holder) + 1;
  if (r.holder < 0 || hop >= r.route.size()) {
    return absl::AbortedError("the failed hop is the origin: nothing to re-route");
  }
  scheduler::Route route;
  route.mb = static_cast<int>(r.mb);
  for (const RouteHop& h : r.route) {
    const int v = index(h.node);
    if (v < 0) return fallback_.Repair(r, view);  // a hop outside the view
    route.nodes.push_back(v);
  }
  route.origin = route.nodes.front();
  route.nodes.push_back(route.origin);
  const int dead = route.nodes[hop];

  scheduler::ModelShape shape;
  shape.num_stages = num_stages;
  shape.layers_per_stage = options_.costs.layers_per_stage;
  shape.samples_per_mb = options_.costs.samples_per_mb;
  shape.bytes_per_mb = options_.costs.bytes_per_mb;
  const size_t n = nodes.size();
  absl::StatusOr<scheduler::TopologyView> topo = scheduler::TopologyView::Create(
      shape, std::move(nodes), PlanningHops(members, view, options_.costs));
  if (!topo.ok()) return absl::AbortedError(topo.status().message());
  for (size_t v = 0; v < n; ++v) {
    const bool failed =
        std::find(r.failed.begin(), r.failed.end(), members[v].id) != r.failed.end();
    if (!failed && view.IsAlive(members[v].id)) continue;
    // The last node of a stage stays in the view (WithoutNode refuses);
    // RerouteInFlight never uses `dead`, and CheckRepair rejects the rest.
    absl::StatusOr<scheduler::TopologyView> less = topo->WithoutNode(static_cast<int>(v));
    if (less.ok()) topo = *std::move(less);
  }
  scheduler::Workload rules;
  rules.path_length = static_cast<int>(r.route.size());
  // A full route stays in order (Note [Full routes stay in order] in
  // scheduler_planner.cc): its completion may not swap the stages left.
  const bool full_route = static_cast<int>(r.route.size()) >= num_stages;
  rules.max_swaps = full_route ? 0 : options_.max_swaps;
  rules.max_jump = options_.max_jump;
  absl::StatusOr<scheduler::Route> fixed =
      scheduler::RerouteInFlight(*topo, rules, route, r.holder, dead);
  if (!fixed.ok()) return absl::AbortedError(fixed.status().message());
  std::vector<RouteHop> out;
  for (size_t i = 0; i + 1 < fixed->nodes.size(); ++i) {
    const int v = fixed->nodes[i];
    out.push_back({members[v].id, topo->stage(v)});
  }
  if (out.size() < r.route.size() && !r.allow_shorter) {
    return absl::AbortedError(absl::StrCat("only a route skipping a stage completes mb ", r.mb,
                                           " and the skip budget does not allow it"));
  }
  return out;
}

}  // namespace skipswarm::node
