// The daemons' per-peer quotas (Note [Peer quotas] in common/peer_quota.h):
// one PeerQuota per service a stranger can reach, with budgets derived from
// the model, the set of members that decides a caller's class, and the
// refusal counts on /metrics.
//
//   DaemonQuotas quotas = MakeDaemonQuotas(model, samples_per_mb, clock);
//   transport_options.quota = quotas.pipeline;      // group, state, manifest
//   quotas.members->SetMembers(live_ids);           // on every view change
//   quotas.members->SetRevokedCheck([m](const NodeId& id) { return m->IsRevoked(id); });
//   ExportQuotaRefusals(quotas, &membership->quota(), &metrics);
//
// Thread rule: MemberSet is thread-safe; the quotas are (PeerQuota).
#ifndef SKIPSWARM_NODE_DAEMON_REPORTING_DAEMON_QUOTAS_H_
#define SKIPSWARM_NODE_DAEMON_REPORTING_DAEMON_QUOTAS_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/node_id.h"
#include "common/peer_quota.h"
#include "model/model_config.h"
#include "node/daemon/reporting/metrics.h"

namespace skipswarm::node {

// Who counts as a member right now: the live records of the gossip view
// (every admitted id in it with members_only quotas), or a static --swarm
// list. A non-member is a stranger, or revoked when the revocation check
// says so (Note [Revocation] in membership/revocation.h): revoked callers
// are refused outright in every admission mode, an open swarm included.
class MemberSet {
 public:
  using RevokedCheck = std::function<bool(const common::NodeId&)>;

  // `newcomers`: those of `ids` on probation in an open swarm (Note
  // [Newcomer probation] in node/daemon/gossip/training_members.h); they
  // get the newcomer budget.
  void SetMembers(const std::vector<common::NodeId>& ids,
                  const std::vector<common::NodeId>& newcomers = {});
  // Asked only for non-members (a revoked member leaves the view first), so
  // members' calls never pay for it. Must be thread-safe.
  void SetRevokedCheck(RevokedCheck check);
  common::PeerClass Classify(const common::NodeId& id) const;

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_set<common::NodeId> ids_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<common::NodeId> newcomers_ ABSL_GUARDED_BY(mu_);
  RevokedCheck revoked_ ABSL_GUARDED_BY(mu_);
};

struct DaemonQuotas {
  std::shared_ptr<MemberSet> members;
  std::shared_ptr<common::PeerQuota> pipeline;  // GrpcTransportOptions::quota
  std::shared_ptr<common::PeerQuota> group;     // GrpcGroupOptions::push_quota
  std::shared_ptr<common::PeerQuota> state;     // group state_quota, StateServerOptions
  std::shared_ptr<common::PeerQuota> manifest;  // ManifestService (callers by address)
  std::shared_ptr<common::PeerQuota> evidence;  // EvidenceService (Note [Evidence bans])
  std::shared_ptr<common::PeerQuota> relay;     // RelayServiceOptions::quota (Note [Paced bytes])
};

// Budgets (F = the model's frame payload bound, model::MaxFramePayloadBytes;
// P = the largest stage's parameter bytes). A member's are far above what
// training sends (so the defences cost nothing without an attacker); a
// stranger's let it join and little else:
//   pipeline  member 1,000 frames/s (burst 1,000), 256 F/s (burst 256 F), 4 streams,
//             50 stream opens/s (burst 100)
//             stranger 20 frames/s (burst 20), 4 F/s (burst 8 F), 1 stream,
//             a stream open every 4 s (burst 2; a refused opening is held
//             until the next, Note [Stream opens])
//   group     member 1,000 pushes/s, 64 P/s (burst 64 P), 32 streams
//             stranger 5/s (burst 10), 256 KiB/s (burst 1 MiB), 1 stream
//   state     member 20 requests/s (burst 40), 16 S/s (burst 16 S), 8 streams,
//             with S = 7 P + 1 MiB (a stage's state bound)
//             stranger 1/s (burst 4), S/60 per s (burst 2 S), 1 stream
//   manifest  (strangers by address) 20 calls/s (burst 50), 64 KiB/s (burst 256 KiB)
//   evidence  member 1 request/s (burst 4), newcomer 0.2/s (burst 2), strangers
//             none (an honest member fetches once per accuser and accused per
//             30 s: Note [Evidence bans] in node/stage/evidence_bans.h)
//   relay     (the bytes a node sends through this node's relay, both as a
//             caller and as an attached node answering its circuits, paced
//             rather than refused: Note [Paced bytes], Note [Relay budgets];
//             a caller's circuits are its streams)
//             member 256 F + 64 P + 16 S + 2 MiB bytes/s (burst the same),
//             64 circuits
//             stranger 4 F + 320 KiB bytes/s (burst 8 F + 1.25 MiB),
//             2 circuits, a circuit open a second (burst 4)
// All strangers together (PeerQuotaOptions::all_strangers: a Sybil burst
// of fresh identities, each within its own budget, is bounded in sum):
//   pipeline  100 frames/s (burst 100), 16 F/s (burst 32 F), 8 streams
//   group     25 pushes/s (burst 50), 2 MiB/s (burst 4 MiB), 8 streams
//   state     4 requests/s (burst 8), S/15 per s (burst 4 S), 4 streams
//   manifest  200 calls/s (burst 500), 1 MiB/s (burst 4 MiB)
//   relay     16 F + 3 MiB bytes/s (burst 32 F + 8 MiB), 16 circuits
// Proven joiners together, while the strangers' budget is short (Note
// [Manifest joiners] in manifest/manifest_service.h), and each proof (an
// invite, or an open swarm's join work) within its own joiner budget, what
// one join needs, so holding the joiners' budget takes 20 proofs:
//   manifest  20 calls/s (burst 40), 64 KiB/s (burst 256 KiB)
//             each proof 1 call/s (burst 3), 4 KiB/s (burst 16 KiB)
// (gossip's: MembershipOptions::joiners_quota and joiner_quota.)
// Newcomers have no shared budget (an open swarm's join work prices their
// identities).
// A newcomer (a member on probation, MemberSet::SetMembers) gets a quarter
// of a member's rates and bursts and fewer streams: still above what one
// replica's training sends a peer (a refusal only makes its sender re-route
// or retry), but a flood from a fresh identity is bounded before anyone
// vouches for it:
//   pipeline  newcomer 250 frames/s (burst 250), 64 F/s (burst 64 F), 2 streams,
//             12.5 stream opens/s (burst 25)
//   group     newcomer 250 pushes/s (burst 250), 16 P/s (burst 16 P), 8 streams
//   state     newcomer 2 requests/s (burst 4), 2 S/s (burst 4 S), 2 streams
//   relay     newcomer a quarter of a member's bytes, 16 circuits
// With `members_only` (a swarm that admits only invited or listed nodes,
// Note [Admission] in membership/admission.h) pipeline, group and state
// refuse strangers outright (PERMISSION_DENIED, reason "not_admitted"; the
// relay does not, like the manifest and gossip); the
// daemon then makes every admitted id in its table a member, tombstones
// included, so a member coming back from DEAD is not refused. The manifest
// stays open (it is the join handshake). In every mode a revoked id
// (MemberSet::SetRevokedCheck) is refused outright (PERMISSION_DENIED,
// reason and class "revoked").
// Every quota holds a refusal repeated within a second for up to 1 s (Note
// [Refusal hold] in common/peer_quota.h), so a peer that asks again at once
// gets about its budget's rate of answers.
// `clock` is borrowed, must outlive the quotas and run their timers.
//
// Note [Relay budgets]
// * The relay paces each direction of a circuit on its sender's key (Note
//   [Relay directions] in node/transport/relay/relay_service.h), and a
//   node's key is one: what it sends as a caller and what it answers as an
//   attached node (summed over every circuit its callers hold) share one
//   bucket. A member's budget is the sum of both, each what the node's own
//   services can honestly need:
//   - as a caller, what the attached node's services would admit from it:
//     frames (256 F, pipeline) and pushes (64 P, group), plus a MiB/s for
//     requests (state, gossip; a stranger's manifest calls);
//   - as an attached node, its answers: acks for those frames and pushes
//     and the small responses (gossip, health, manifest, evidence), a MiB/s,
//     and stage state, the one large answer, at the state service's
//     member budget (16 S/s, burst 16 S: what it serves one requester at
//     that requester's full rate, or sixteen replicas fetching a stage's
//     state at once).
//   Both far above what training sends (a frame stream, a push per
//   averaging step, a state transfer per join), so an honest member is
//   never paused; a node's real link is far below either.
// * A newcomer gets a quarter of that, as on the other services. A
//   stranger's is unchanged: an attached stranger is a joiner behind NAT
//   (or a member whose record has yet to reach the relay), whose answers
//   are gossip and health responses, not state; its answers also draw on
//   all strangers' budget, so strangers cannot flood through answers what
//   they may not through calls. Attaching is not membership: the class is
//   the quota's classifier's, as for a caller.
// * A stranger's rate times the relay's max_pace stays above a node's
//   whole circuits (max_circuits_per_node) of the attacher's largest
//   message (kSpliceChunkBytes) for every model (F is at least a MiB), so
//   a member the relay does not know yet, answering all its circuits at
//   once, is slowed until its record arrives but has none ended (Note
//   [Relay directions]).
DaemonQuotas MakeDaemonQuotas(const model::ModelConfig& model, int samples_per_mb,
                              common::Clock* clock, bool members_only = false);

// skipswarm_peer_quota_refusals_total{service,reason,peer_class},
// skipswarm_peer_quota_held_refusals_total{service} and
// skipswarm_peer_quota_paced_total{service} of every quota (and of
// gossip's, when given), as counted so far.
void ExportQuotaRefusals(const DaemonQuotas& quotas, const common::PeerQuota* gossip,
                         Metrics* metrics);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_REPORTING_DAEMON_QUOTAS_H_
