#include "node/daemon/gossip/join_role.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "node/daemon/gossip/join_planning.h"
#include "node/daemon/gossip/training_members.h"

namespace skipswarm::node {
namespace {

constexpr uint64_t kAnyIteration = std::numeric_limits<uint64_t>::max();

// The largest measured throughput of `id`'s links (Note [Join role]); 0:
// none measured.
double MeasuredUplink(const membership::View& view, const common::NodeId& id) {
  double best = 0;
  for (const membership::LinkInfo& l : view.links) {
    if (l.from == id) best = std::max(best, l.bytes_per_second);
  }
  return best;
}

double LinkBandwidth(const membership::View& view, const common::NodeId& a,
                     const common::NodeId& b) {
  for (const membership::LinkInfo& l : view.links) {
    if (((l.from == a && l.to == b) || (l.from == b && l.to == a)) && l.bytes_per_second > 0) {
      return l.bytes_per_second;
    }
  }
  return 0;  // unknown: unlimited
}

double HalfRttOr1ms(const membership::View& view, const common::NodeId& a,
                    const common::NodeId& b) {
  for (const membership::LinkInfo& l : view.links) {
    if (((l.from == a && l.to == b) || (l.from == b && l.to == a)) &&
        l.rtt != absl::InfiniteDuration()) {
      return absl::ToDoubleSeconds(l.rtt) / 2;
    }
  }
  return 1e-3;
}

bool Trains(const membership::MemberInfo& m, const common::NodeId& self) {
  return m.id != self && m.live() && !m.paused && TrainsIn(m, kAnyIteration, TrainingFace::kGroup);
}

}  // namespace

std::vector<int> LeastCoveredSubnetwork(const membership::View& view, const common::NodeId& self,
                                        int num_stages, int sdp_stages) {
  const int middle = num_stages - 2;
  const int take = std::clamp(sdp_stages - 2, 0, std::max(0, middle));
  std::vector<int> coverage(static_cast<size_t>(std::max(0, num_stages)), 0);
  for (const membership::MemberInfo& m : view.members) {
    if (!Trains(m, self) || !m.subnetwork) continue;
    for (uint32_t s : m.stages) {
      if (s < coverage.size()) ++coverage[s];
    }
  }
  int best_start = 0;
  int best_load = std::numeric_limits<int>::max();
  for (int c = 0; c < std::max(1, middle) && take > 0; ++c) {
    int load = 0;
    for (int j = 0; j < take; ++j) load += coverage[static_cast<size_t>(1 + (c + j) % middle)];
    if (load < best_load) {
      best_load = load;
      best_start = c;
    }
  }
  std::vector<int> out = {0};
  for (int j = 0; j < take; ++j) out.push_back(1 + (best_start + j) % middle);
  if (num_stages > 1) out.push_back(num_stages - 1);
  std::sort(out.begin(), out.end());
  return out;
}

absl::StatusOr<JoinRole> ChooseJoinRole(const membership::View& view, const common::NodeId& self,
                                        const JoinRoleInputs& in) {
  const int num_stages = in.model.shape.num_stages;
  if (num_stages < 2 || !(in.model.params > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "choosing SDP or pipeline needs a model of >= 2 stages and its parameter count (got ",
        num_stages, " stages, ", in.model.params, " parameters)"));
  }
  scheduler::HybridSwarm swarm;
  swarm.model = in.model;
  swarm.workload = in.workload;
  swarm.averaging = in.averaging;
  std::vector<common::NodeId> ids;
  std::vector<scheduler::NodeRole> roles;
  for (const membership::MemberInfo& m : view.members) {
    if (!Trains(m, self)) continue;
    scheduler::HybridNode n;
    n.spec.name = m.id.ShortString();
    n.spec.id = m.id;
    n.spec.stage = m.stages.empty() ? -1 : static_cast<int>(m.stages[0]);
    n.spec.sec_per_layer_sample = m.seconds_per_layer_per_sample > 0
                                      ? m.seconds_per_layer_per_sample
                                      : kDefaultSecPerLayerSample;
    n.spec.memory_slots = std::max<int>(1, static_cast<int>(m.memory_slots));
    n.uplink_bytes_per_s = MeasuredUplink(view, m.id);
    swarm.nodes.push_back(n);
    ids.push_back(m.id);
    roles.push_back(m.subnetwork ? scheduler::NodeRole::kSdp : scheduler::NodeRole::kPipeline);
  }
  scheduler::HybridNode joiner;
  joiner.spec.name = "joiner";
  joiner.spec.id = self;
  joiner.spec.sec_per_layer_sample =
      in.sec_per_layer_sample > 0 ? in.sec_per_layer_sample : kDefaultSecPerLayerSample;
  joiner.spec.memory_slots = std::max(1, in.memory_slots);
  joiner.memory_gib = in.memory_gib;
  joiner.max_stages = in.max_stages;
  joiner.uplink_bytes_per_s =
      in.uplink_bytes_per_s > 0 ? in.uplink_bytes_per_s : MeasuredUplink(view, self);
  swarm.nodes.push_back(joiner);
  ids.push_back(self);
  const size_t n = ids.size();
  swarm.hop_s.assign(n * n, 0);
  swarm.link_bytes_per_s.assign(n * n, 0);
  for (size_t u = 0; u < n; ++u) {
    for (size_t v = u + 1; v < n; ++v) {
      swarm.hop_s[u * n + v] = swarm.hop_s[v * n + u] = HalfRttOr1ms(view, ids[u], ids[v]);
      swarm.link_bytes_per_s[u * n + v] = swarm.link_bytes_per_s[v * n + u] =
          LinkBandwidth(view, ids[u], ids[v]);
    }
  }
  const int me = static_cast<int>(n - 1);
  scheduler::HybridOptions options;
  options.max_evaluations = 200;

  JoinRole out;
  absl::Status pipeline_error, sdp_error;
  std::vector<int> pipeline_stage;
  absl::StatusOr<int> stage =
      ChooseJoinStage(view, self, in.model.shape, joiner.spec.sec_per_layer_sample);
  if (!stage.ok()) {
    pipeline_error = stage.status();
  } else {
    swarm.nodes[me].spec.stage = *stage;
    if (scheduler::PipelineSlots(swarm, me) < 1) {
      pipeline_error = absl::FailedPreconditionError(
          absl::StrCat("a pipeline stage does not fit its ", in.memory_gib, " GiB"));
    } else {
      std::vector<scheduler::NodeRole> r = roles;
      r.push_back(scheduler::NodeRole::kPipeline);
      absl::StatusOr<scheduler::HybridPlan> plan = scheduler::CostRoles(swarm, r, options);
      if (plan.ok()) {
        out.pipeline_tokens_per_s = plan->tokens_per_s;
        pipeline_stage = {*stage};
      } else {
        pipeline_error = plan.status();
      }
    }
  }
  if (!scheduler::FitsSdp(swarm, me)) {
    sdp_error = absl::FailedPreconditionError(absl::StrCat(
        "a subnetwork of ", scheduler::SdpStages(swarm), " stages does not fit (",
        in.memory_gib, " GiB, at most ", in.max_stages, " stages; 0: unlimited)"));
  } else {
    std::vector<scheduler::NodeRole> r = roles;
    r.push_back(scheduler::NodeRole::kSdp);
    absl::StatusOr<scheduler::HybridPlan> plan = scheduler::CostRoles(swarm, r, options);
    if (plan.ok()) {
      out.sdp_tokens_per_s = plan->tokens_per_s;
    } else {
      sdp_error = plan.status();
    }
  }
  if (!pipeline_error.ok() && !sdp_error.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("this node can take neither role: as a pipeline host, ",
                     pipeline_error.message(), "; as an SDP worker, ", sdp_error.message()));
  }
  out.sdp = !sdp_error.ok() ? false
            : !pipeline_error.ok()
                ? true
                : out.sdp_tokens_per_s > out.pipeline_tokens_per_s;
  out.stages = out.sdp ? LeastCoveredSubnetwork(view, self, num_stages, scheduler::SdpStages(swarm))
                       : pipeline_stage;
  if (!pipeline_error.ok()) {
    out.reason = absl::StrCat("a pipeline stage does not do: ", pipeline_error.message());
  } else if (!sdp_error.ok()) {
    out.reason = absl::StrCat("a subnetwork does not do: ", sdp_error.message());
  } else {
    out.reason = absl::StrFormat("%.4g tokens/s as an SDP worker, %.4g as a pipeline host",
                                 out.sdp_tokens_per_s, out.pipeline_tokens_per_s);
  }
  return out;
}

}  // namespace skipswarm::node
