#include "node/daemon/join_planning.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "node/daemon/training_members.h"
#include "scheduler/allocation.h"

namespace skipswarm::node {
namespace {

constexpr uint64_t kAnyIteration = std::numeric_limits<uint64_t>::max();

double SpeedOf(const membership::MemberInfo& m) {
  return m.seconds_per_layer_per_sample > 0 ? m.seconds_per_layer_per_sample
                                            : kDefaultSecPerLayerSample;
}

}  // namespace

absl::StatusOr<int> ChooseJoinStage(const membership::View& view, const common::NodeId& self,
                                    const scheduler::ModelShape& model,
                                    double sec_per_layer_sample, bool allow_data_stage) {
  std::vector<const membership::MemberInfo*> members;
  std::vector<scheduler::NodeSpec> nodes;
  for (const membership::MemberInfo& m : view.members) {
    if (m.id == self || !m.live() || !TrainsIn(m, kAnyIteration, TrainingFace::kGroup)) continue;
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
    members.push_back(&m);
    nodes.push_back(n);
  }
  const size_t n = nodes.size();
  auto rtt = [&](const common::NodeId& a, const common::NodeId& b) {
    for (const membership::LinkInfo& l : view.links) {
      if (((l.from == a && l.to == b) || (l.from == b && l.to == a)) &&
          l.rtt != absl::InfiniteDuration()) {
        return absl::ToDoubleSeconds(l.rtt) / 2;
      }
    }
    return 1e-3;
  };
  std::vector<double> hops(n * n, 0);
  std::vector<double> hop_to(n, 0);
  for (size_t u = 0; u < n; ++u) {
    hop_to[u] = rtt(self, members[u]->id);
    for (size_t v = 0; v < n; ++v) {
      if (u < v) hops[u * n + v] = hops[v * n + u] = rtt(members[u]->id, members[v]->id);
    }
  }
  absl::StatusOr<scheduler::TopologyView> topo =
      scheduler::TopologyView::Create(model, nodes, hops);
  if (!topo.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the swarm cannot take a joiner yet: ", topo.status().message()));
  }
  scheduler::NodeSpec joiner;
  joiner.name = "joiner";
  joiner.id = self;
  joiner.sec_per_layer_sample =
      sec_per_layer_sample > 0 ? sec_per_layer_sample : kDefaultSecPerLayerSample;
  joiner.memory_slots = 1;
  scheduler::JoinChoiceOptions choice;
  choice.allow_data_stage = allow_data_stage;
  return scheduler::ChooseStageForJoiner(*topo, joiner, hop_to, choice);
}

std::vector<StateSource> StateSources(const membership::View& view, const common::NodeId& self,
                                      int stage) {
  std::vector<const membership::MemberInfo*> hosts;
  for (const membership::MemberInfo& m : view.members) {
    if (m.id == self || !m.live() || !TrainsIn(m, kAnyIteration, TrainingFace::kGroup)) continue;
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
