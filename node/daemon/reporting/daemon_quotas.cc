#include "node/daemon/reporting/daemon_quotas.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "model/memory_estimate.h"

namespace skipswarm::node {

void MemberSet::SetMembers(const std::vector<common::NodeId>& ids,
                           const std::vector<common::NodeId>& newcomers) {
  absl::flat_hash_set<common::NodeId> next(ids.begin(), ids.end());
  absl::flat_hash_set<common::NodeId> fresh(newcomers.begin(), newcomers.end());
  absl::MutexLock lock(&mu_);
  ids_ = std::move(next);
  newcomers_ = std::move(fresh);
}

void MemberSet::SetRevokedCheck(RevokedCheck check) {
  absl::MutexLock lock(&mu_);
  revoked_ = std::move(check);
}

common::PeerClass MemberSet::Classify(const common::NodeId& id) const {
  RevokedCheck revoked;
  {
    absl::MutexLock lock(&mu_);
    if (ids_.contains(id)) {
      return newcomers_.contains(id) ? common::PeerClass::kNewcomer : common::PeerClass::kMember;
    }
    revoked = revoked_;
  }
  // Outside our lock: the check may take the membership's.
  return revoked && revoked(id) ? common::PeerClass::kRevoked : common::PeerClass::kStranger;
}

namespace {

std::shared_ptr<common::PeerQuota> Make(const char* service, common::QuotaBudget member,
                                        common::QuotaBudget stranger, common::Clock* clock,
                                        const std::shared_ptr<MemberSet>& members,
                                        std::optional<common::QuotaBudget> newcomer = {},
                                        std::optional<common::QuotaBudget> all_strangers = {},
                                        std::optional<common::QuotaBudget> joiners = {},
                                        std::optional<common::QuotaBudget> joiner = {}) {
  common::PeerQuotaOptions o;
  o.service = service;
  o.member = member;
  o.stranger = stranger;
  o.newcomer = newcomer;
  o.all_strangers = all_strangers;
  o.joiners = joiners;
  o.joiner = joiner;
  o.max_hold = common::kDaemonMaxHold;  // Note [Refusal hold]
  o.max_stream_open_hold = common::kDaemonMaxStreamOpenHold;
  auto quota = std::make_shared<common::PeerQuota>(o, clock);
  if (members != nullptr) {
    // The set outlives nothing it is not shared with: the quota holds it.
    quota->SetClassifier(
        [members](const common::NodeId& id) { return members->Classify(id); });
  }
  return quota;
}

}  // namespace

DaemonQuotas MakeDaemonQuotas(const model::ModelConfig& model, int samples_per_mb,
                              common::Clock* clock, bool members_only) {
  const double f =
      static_cast<double>(model::MaxFramePayloadBytes(model, samples_per_mb));
  int64_t largest = 0;
  for (int s = 0; s < model.num_stages; ++s) {
    largest = std::max(largest, model.StageParameterCount(s));
  }
  const double p = static_cast<double>(largest) * sizeof(float);
  const double state = 7 * p + (1 << 20);
  // Note [Admission]: a stranger's budget, or nothing.
  auto stranger = [members_only](common::QuotaBudget b) {
    if (members_only) b = common::QuotaBudget{0, 0, 0, 0, 0, /*closed=*/true};
    return b;
  };
  // All strangers together (Note [Peer quotas]); none where they are
  // refused outright anyway.
  auto all = [members_only](common::QuotaBudget b) -> std::optional<common::QuotaBudget> {
    if (members_only) return std::nullopt;
    return b;
  };
  DaemonQuotas q;
  q.members = std::make_shared<MemberSet>();
  // The pipeline's last two numbers: stream opens per second and their
  // burst (Note [Stream opens]); a peer keeps its pipeline streams open and
  // reopens one only when it breaks. Not on group pushes: a push is a
  // stream, and a member whose record this node has not seen yet (a
  // restarted or new replica) pushes as a stranger at its push rate.
  q.pipeline = Make("pipeline", {1000, 1000, 256 * f, 256 * f, 4, false, 50, 100},
                    stranger({20, 20, 4 * f, 8 * f, 1, false, 0.25, 2}), clock, q.members,
                    common::QuotaBudget{250, 250, 64 * f, 64 * f, 2, false, 12.5, 25},
                    all({100, 100, 16 * f, 32 * f, 8}));
  q.group = Make("group", {1000, 1000, 64 * p, 64 * p, 32},
                 stranger({5, 10, 256 << 10, 1 << 20, 1}), clock, q.members,
                 common::QuotaBudget{250, 250, 16 * p, 16 * p, 8},
                 all({25, 50, 2 << 20, 4 << 20, 8}));
  q.state = Make("state", {20, 40, 16 * state, 16 * state, 8},
                 stranger({1, 4, state / 60, 2 * state, 1}), clock, q.members,
                 common::QuotaBudget{2, 4, 2 * state, 4 * state, 2},
                 all({4, 8, state / 15, 4 * state, 4}));
  // Proven joiners while the strangers' budget is short (Note [Manifest
  // joiners] in manifest/manifest_service.h): a join is one call, retried
  // with a back-off, so each proof's own budget is a call a second with a
  // burst for the retries (the bytes: a request of at most an invite and
  // a key, a few at once), a twentieth of all joiners' together.
  q.manifest = Make("manifest", {}, {20, 50, 64 << 10, 256 << 10, 0}, clock, nullptr,
                    std::nullopt, common::QuotaBudget{200, 500, 1 << 20, 4 << 20, 0},
                    common::QuotaBudget{20, 40, 64 << 10, 256 << 10, 0},
                    common::QuotaBudget{1, 3, 4 << 10, 16 << 10, 0});
  // Note [Relay budgets]: a member's bytes are what it sends through this
  // relay as a caller plus what it answers as an attached node, so honest
  // traffic through a relay is never paused in either direction. Circuits
  // are streams; opening one costs the relay and the attached node a call
  // each, so a stranger's openings are rated too. Open to strangers in
  // every mode, as gossip and the manifest are: a joiner's record may
  // reach the relay after its first call to an attached node.
  const double calls = 256 * f + 64 * p + (1 << 20);
  const double answers = 16 * state + (1 << 20);
  const double member_bytes = calls + answers;
  q.relay = Make("relay", {0, 0, member_bytes, member_bytes, 64},
                 {0, 0, 4 * f + (320 << 10), 8 * f + (1280 << 10), 2, false, 1, 4}, clock,
                 q.members, common::QuotaBudget{0, 0, member_bytes / 4, member_bytes / 4, 16},
                 common::QuotaBudget{0, 0, 16 * f + (3 << 20), 32 * f + (8 << 20), 16});
  q.evidence = Make("evidence", {1, 4, 0, 0, 0}, common::QuotaBudget{0, 0, 0, 0, 0, true}, clock,
                    q.members, common::QuotaBudget{0.2, 2, 0, 0, 0});
  return q;
}

void ExportQuotaRefusals(const DaemonQuotas& quotas, const common::PeerQuota* gossip,
                         Metrics* metrics) {
  const std::vector<const common::PeerQuota*> all = {
      quotas.pipeline.get(), quotas.group.get(), quotas.state.get(), quotas.manifest.get(),
      quotas.evidence.get(), quotas.relay.get(), gossip};
  for (const common::PeerQuota* quota : all) {
    if (quota == nullptr) continue;
    for (const auto& [key, count] : quota->refusals()) {
      metrics->Set("skipswarm_peer_quota_refusals_total", static_cast<double>(count),
                   absl::StrCat("service=\"", quota->options().service, "\",reason=\"",
                                common::QuotaReasonName(key.reason), "\",peer_class=\"",
                                common::PeerClassName(key.peer_class), "\""));
    }
    metrics->Set("skipswarm_peer_quota_held_refusals_total",
                 static_cast<double>(quota->held_refusals()),
                 absl::StrCat("service=\"", quota->options().service, "\""));
    metrics->Set("skipswarm_peer_quota_paced_total", static_cast<double>(quota->paced()),
                 absl::StrCat("service=\"", quota->options().service, "\""));
  }
}

}  // namespace skipswarm::node
