#include "node/daemon/gossip/join_planning.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "node/daemon/gossip/training_members.h"
#include "scheduler/allocation.h"

namespace skipswarm::node {
namespace {

constexpr uint64_t kAnyIteration = std::numeric_limits<uint64_t>::max();

double SpeedOf(const membership::MemberInfo& m) {
  return m.seconds_per_layer_per_sample > 0 ? m.seconds_per_layer_per_sample
                                            : kDefaultSecPerLayerSample;
}

// Half the smoothed RTT between `a` and `b` (either direction), 1 ms when
// unmeasured.
double HalfRtt(const membership::View& view, const common::NodeId& a, const common::NodeId& b) {
  for (const membership::LinkInfo& l : view.links) {
    if (((l.from == a && l.to == b) || (l.from == b && l.to == a)) &&
        l.rtt != absl::InfiniteDuration()) {
      return absl::ToDoubleSeconds(l.rtt) / 2;
    }
  }
  return 1e-3;
}

}  // namespace

namespace {

// The swarm's training members (one stage each) as a scheduler topology,
// without `skip` (null: everyone) and, with `skip_paused`, without paused
// members (Note [Paused members]); `members[i]` is node i.
struct SwarmTopology {
  std::vector<const membership::MemberInfo*> members;
  std::optional<scheduler::TopologyView> topo;
};

absl::StatusOr<SwarmTopology> BuildTopology(const membership::View& view,
                                            const common::NodeId* skip,
                                            const scheduler::ModelShape& model,
                                            bool skip_paused = false) {
  SwarmTopology out;
  std::vector<scheduler::NodeSpec> nodes;
  for (const membership::MemberInfo& m : view.members) {
    // Subnetwork (SDP) members are no pipeline capacity (Note [Mixed local
    // swarm] in launcher/local_layout.h).
    if ((skip != nullptr && m.id == *skip) || !m.live() || (skip_paused && m.paused) ||
        m.subnetwork || !TrainsIn(m, kAnyIteration, TrainingFace::kGroup)) {
      continue;
    }
    if (m.stages.size() != 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          "member ", m.id.ShortString(), " hosts ", m.stages.size(),
          " stages; choosing a stage needs one stage per member (pass --host_stages)"));
    }
    scheduler::NodeSpec n;
    n.name = m.id.ShortString();
    n.id = m.id;
    n.stage = static_cast<int>(m.stages[0]);
    n.sec_per_layer_sample = SpeedOf(m);
    n.memory_slots = std::max<int>(1, static_cast<int>(m.memory_slots));
    out.members.push_back(&m);
    nodes.push_back(n);
  }
  const size_t n = nodes.size();
  std::vector<double> hops(n * n, 0);
  for (size_t u = 0; u < n; ++u) {
    for (size_t v = u + 1; v < n; ++v) {
      hops[u * n + v] = hops[v * n + u] = HalfRtt(view, out.members[u]->id, out.members[v]->id);
    }
  }
  absl::StatusOr<scheduler::TopologyView> topo = scheduler::TopologyView::Create(model, nodes, hops);
  if (!topo.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the swarm cannot take a joiner yet: ", topo.status().message()));
  }
  out.topo = *std::move(topo);
  return out;
}

// The lowest non-zero stage that `swarm`'s live members host only paused
// (Note [Paused members]); nullopt when every stage has an unpaused one.
std::optional<int> StageWithPausedReplicasOnly(const SwarmTopology& swarm, int num_stages) {
  std::vector<bool> unpaused(static_cast<size_t>(num_stages), false);
  for (const membership::MemberInfo* m : swarm.members) {
    const int s = static_cast<int>(m->stages[0]);
    if (!m->paused && s >= 0 && s < num_stages) unpaused[static_cast<size_t>(s)] = true;
  }
  for (int s = 1; s < num_stages; ++s) {
    if (!unpaused[static_cast<size_t>(s)]) return s;
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<int> ChooseJoinStage(const membership::View& view, const common::NodeId& self,
                                    const scheduler::ModelShape& model,
                                    double sec_per_layer_sample, bool allow_data_stage) {
  // Everyone first: the swarm's shape errors (a member with several
  // stages, a stage nobody hosts) are reported as they are.
  SS_ASSIGN_OR_RETURN(SwarmTopology everyone, BuildTopology(view, &self, model));
  // Note [Paused members]: a paused member trains nothing, so it is no
  // stage's capacity (as in ChooseOwnMove). A stage hosted by paused
  // members only has none at all, the weakest there is: the joiner takes
  // it (the swarm's training waits on it). Otherwise the choice is made
  // without the paused members; with them only where leaving them out
  // leaves no data node (a record no daemon of ours signs: data nodes
  // cannot pause), as the best estimate left.
  if (std::optional<int> idle = StageWithPausedReplicasOnly(everyone, model.num_stages)) {
    return *idle;
  }
  absl::StatusOr<SwarmTopology> unpaused =
      BuildTopology(view, &self, model, /*skip_paused=*/true);
  SwarmTopology swarm = unpaused.ok() ? *std::move(unpaused) : std::move(everyone);
  std::vector<double> hop_to;
  for (const membership::MemberInfo* m : swarm.members) hop_to.push_back(HalfRtt(view, self, m->id));
  scheduler::NodeSpec joiner;
  joiner.name = "joiner";
  joiner.id = self;
  joiner.sec_per_layer_sample =
      sec_per_layer_sample > 0 ? sec_per_layer_sample : kDefaultSecPerLayerSample;
  joiner.memory_slots = 1;
  scheduler::JoinChoiceOptions choice;
  choice.allow_data_stage = allow_data_stage;
  return scheduler::ChooseStageForJoiner(*swarm.topo, joiner, hop_to, choice);
}

absl::StatusOr<std::optional<OwnMove>> ChooseOwnMove(const membership::View& view,
                                                     const common::NodeId& self,
                                                     const scheduler::ModelShape& model,
                                                     uint64_t iteration, double min_gain) {
  for (const membership::MemberInfo* m : view.Live()) {
    // Someone is entering or moving: wait until it trains (its speed
    // counts), i.e. past its entry and with its state loaded (Note [Routed
    // once ready]: a mover past its switch may still be fetching).
    if (m->iteration > iteration || m->entering) return std::optional<OwnMove>();
  }
  // Note [Paused members]: a paused member trains nothing, so it is no
  // stage's capacity (else the rule could move a stage's last unpaused
  // replica away), and it never moves (StepMove).
  SS_ASSIGN_OR_RETURN(SwarmTopology swarm,
                      BuildTopology(view, nullptr, model, /*skip_paused=*/true));
  scheduler::RebalanceOptions options;
  options.min_gain = min_gain;
  std::optional<scheduler::RebalanceMove> move =
      scheduler::ChooseRebalanceMove(*swarm.topo, options);
  if (!move || swarm.members[move->node]->id != self) return std::optional<OwnMove>();
  return std::optional<OwnMove>(
      OwnMove{move->from, move->to, move->bottleneck_after / move->bottleneck_before});
}

std::vector<StateSource> StateSources(const membership::View& view, const common::NodeId& self,
                                      int stage) {
  std::vector<const membership::MemberInfo*> hosts;
  for (const membership::MemberInfo& m : view.members) {
    // A joiner or mover still fetching its own state has none to give
    // (Note [Routed once ready] in training_members.h).
    if (m.id == self || !m.live() || m.entering ||
        !TrainsIn(m, kAnyIteration, TrainingFace::kGroup)) {
      continue;
    }
    if (std::find(m.stages.begin(), m.stages.end(), static_cast<uint32_t>(stage)) ==
        m.stages.end()) {
      continue;
    }
    hosts.push_back(&m);
  }
  std::stable_sort(hosts.begin(), hosts.end(), [](const auto* a, const auto* b) {
    return (a->iteration == 0) > (b->iteration == 0);
  });
  std::vector<StateSource> out;
  for (const auto* m : hosts) out.push_back({m->addresses[3], m->id});
  return out;
}

}  // namespace skipswarm::node
