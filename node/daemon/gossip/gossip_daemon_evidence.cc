// GossipDaemon's side of Note [Evidence bans] (node/stage/evidence_bans.h):
// serving the evidence our output checks kept, and fetching and checking
// the evidence behind bans in our view that the verify quorum did not
// adopt.
#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "node/compute/sketch_wire.h"
#include "node/daemon/gossip/gossip_daemon_parts.h"

namespace skipswarm::node {

void GossipDaemon::Parts::SetUpEvidence(grpc::ServerBuilder* builder,
                                        const std::string& swarm_id) {
  const NodeDaemonOptions& o = base();
  EvidenceServiceOptions so;
  so.self = self;
  so.swarm_id = swarm_id;
  so.credentials = credentials;
  so.quota = quotas.evidence;
  // gRPC's threads: the stack only under `stack_mu` (Note [Stack hand-over]).
  so.evidence_against = [this](const common::NodeId& id) {
    absl::MutexLock lock(&stack_mu);
    if (stack == nullptr || stack->server() == nullptr) return std::vector<Evidence>{};
    return stack->server()->EvidenceAgainst(id);
  };
  evidence_service = std::make_unique<EvidenceService>(std::move(so));
  builder->RegisterService(evidence_service.get());

  // Note [Evidence bans]: a false-input proof convicts whatever the
  // accused's trust and needs no judge, so adoption runs in every swarm;
  // a sketch mismatch needs newcomers to attribute it to (Note [Verify
  // trust]) and the real judge (without one such a piece is invalid).
  EvidenceAdopterOptions ao;
  ao.self = self;
  ao.lookup.public_key_of = [m = members.get()](const common::NodeId& id) {
    return m->PublicKeyOf(id);
  };
  ao.lookup.trusted = [m = members.get()](const common::NodeId& id) { return m->Trusted(id); };
  ao.limits = ActivationSketchLimits(o.model.model, std::max(1, o.model.samples_per_mb));
  ao.judge = backend.output_judge;
  if (!ao.judge) {
    ao.judge = [](const WireTensor&, const model::OutputSketch&,
                  const model::SketchCheckOptions&) -> absl::StatusOr<model::SketchVerdict> {
      return absl::FailedPreconditionError("no output judge");
    };
  }
  EvidenceFetchOptions fo;
  fo.self = self;
  fo.swarm_id = swarm_id;
  fo.credentials = credentials;
  fo.deadline = absl::Seconds(5);
  ao.fetch = [fo](const common::NodeId& accuser, const std::string& address,
                  const common::NodeId& accused) {
    return FetchEvidence(fo, accuser, address, accused);
  };
  evidence_adopter =
      std::make_unique<EvidenceAdopter>(std::move(ao), evidence_bans.get(), clock.get());
}

void GossipDaemon::Parts::ConsiderEvidence() {
  if (evidence_adopter == nullptr) return;
  // The members' routing face as gossip fills it (with their records' bans
  // and addresses), not the VerifiedRoutingView over it: one this node
  // already routes around is still a live member the adoption must see.
  SwarmView* view = members->routing();
  std::vector<PeerInfo> live;
  for (PeerInfo& p : view->Members()) {
    if (view->IsAlive(p.id)) live.push_back(std::move(p));
  }
  std::set<common::NodeId> own;
  if (group != nullptr) {
    for (const auto& [id, reason] : group->banned()) own.insert(id);
  }
  for (const common::NodeId& id : verify_trust->condemned()) own.insert(id);
  evidence_adopter->Consider(live, own);
}

void GossipDaemon::Parts::ExportEvidenceMetrics() {
  if (evidence_service != nullptr) {
    const EvidenceServeCounts c = evidence_service->counts();
    metrics.Set("skipswarm_evidence_served_total", static_cast<double>(c.served));
    metrics.Set("skipswarm_evidence_pieces_served_total", static_cast<double>(c.pieces_served));
    for (const auto& [reason, n] : c.refused) {
      metrics.Set("skipswarm_evidence_requests_refused_total", static_cast<double>(n),
                  absl::StrCat("reason=\"", reason, "\""));
    }
  }
  if (evidence_adopter != nullptr) {
    const EvidenceAdoptionCounts c = evidence_adopter->counts();
    metrics.Set("skipswarm_evidence_fetches_total", static_cast<double>(c.fetches));
    metrics.Set("skipswarm_evidence_fetch_failures_total", static_cast<double>(c.fetch_failures));
    for (const auto& [verdict, n] : c.pieces) {
      metrics.Set("skipswarm_evidence_pieces_checked_total", static_cast<double>(n),
                  absl::StrCat("verdict=\"", verdict, "\""));
    }
    metrics.Set("skipswarm_evidence_bans_adopted_total", static_cast<double>(c.adopted));
  }
}

}  // namespace skipswarm::node
