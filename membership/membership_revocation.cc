// Membership::Impl's revocation list (Note [Revocation] in
// membership/revocation.h, Note [Eviction] in membership_impl.h).
#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "membership/membership_impl.h"
#include "proto/version.h"

namespace skipswarm::membership {

bool Membership::Impl::ApplyRevocationsLocked(const proto::SignedRevocationList& signed_list,
                                              RevocationSet set, Changes* changes) {
  if (set.serial <= revoked_.serial) return false;
  revocations_ = signed_list;
  revoked_ = std::move(set);
  stats_.revocation_serial = revoked_.serial;
  stats_.revoked_entries = revoked_.size();
  // Like a record's news: a few rounds of gossip; push-pulls always carry it.
  revocation_sends_ =
      std::max(1, options_.retransmit_mult *
                      static_cast<int>(std::ceil(std::log10(LiveCountLocked() + 1.0))));
  ++version_;
  std::vector<common::NodeId> out;
  for (const auto& [id, m] : members_) {
    if (id != self_ && revoked_.Revokes(id, m.record.invite())) out.push_back(id);
  }
  std::sort(out.begin(), out.end());  // hash order is not deterministic
  for (const common::NodeId& id : out) {
    if (!revoked_.nodes.contains(id)) revoked_by_invite_.insert(id);
    EvictLocked(id, absl::StrCat("revoked (revocation list ", revoked_.serial, ")"), changes);
  }
  LOG(INFO) << "membership " << self_ << ": revocation list " << revoked_.serial << " ("
            << revoked_.nodes.size() << " nodes, " << revoked_.invites.size()
            << " invites) evicted " << out.size() << " members";
  if (!warned_self_revoked_ && revoked_.Revokes(self_, members_[self_].record.invite())) {
    warned_self_revoked_ = true;
    self_admission_ = absl::FailedPreconditionError(absl::StrCat(
        "the swarm's founder revoked this node (or its invite) in revocation list ",
        revoked_.serial, "; every member refuses it from now on"));
    LOG(ERROR) << "membership " << self_ << ": " << self_admission_.message();
  }
  return true;
}

bool Membership::Impl::IsRevokedLocked(const common::NodeId& id,
                                       const proto::SignedInvite& invite) const {
  return revoked_.Revokes(id, invite);
}

bool Membership::IsRevoked(const common::NodeId& id) const {
  absl::MutexLock lock(&impl_->mu_);
  return impl_->revoked_.nodes.contains(id) || impl_->revoked_by_invite_.contains(id);
}

absl::Status Membership::SelfAdmission() const {
  absl::MutexLock lock(&impl_->mu_);
  return impl_->self_admission_;
}

void Membership::Impl::AddRevocationsLocked(proto::Gossip* out) const {
  if (revoked_.serial > 0) *out->mutable_revocations() = revocations_;
}

// Note [Revocation notice]: a revoked member learns the list only from a
// message that carries it, and once evicted it gets none: members no
// longer probe it or gossip to it, and they refuse its probes. So it ran
// on, refused everywhere, probing members that answered PERMISSION_DENIED
// for as long as it lived. Its probes are now answered with an ack that
// holds the founder-signed list and nothing else (no records, no updates,
// no member table): the list is what every member gossips anyway, and the
// signature, not the sender, is what the prober checks. Its membership
// applies the list, finds itself revoked (SelfAdmission), and its daemon
// stops with the cause within about one probe interval of the eviction.
// Only probes (Ping, PingReq) get it: a push-pull is how a node joins,
// and a revoked joiner is refused with the cause as before.
std::optional<proto::Ack> Membership::Impl::RevocationNotice(const common::NodeId& sender,
                                                             uint64_t seq) {
  absl::MutexLock lock(&mu_);
  if (revoked_.serial == 0 ||
      (!revoked_.nodes.contains(sender) && !revoked_by_invite_.contains(sender))) {
    return std::nullopt;
  }
  ++stats_.revocation_notices;
  proto::Ack ack;
  ack.set_protocol_version(proto::kProtocolVersion);
  ack.set_from(self_.Bytes());
  ack.set_seq(seq);
  AddRevocationsLocked(ack.mutable_gossip());
  return ack;
}

absl::Status Membership::AddRevocations(const proto::SignedRevocationList& list) {
  absl::StatusOr<RevocationSet> set =
      VerifyRevocations(list, impl_->options_.policy.admission);  // outside the lock
  Impl::Changes changes;
  {
    absl::MutexLock lock(&impl_->mu_);
    if (!set.ok()) {
      ++impl_->stats_.revocations_rejected;
      return set.status();
    }
    const uint64_t serial = set->serial;
    if (!impl_->ApplyRevocationsLocked(list, *std::move(set), &changes)) {
      return absl::AlreadyExistsError(absl::StrCat("revocation list ", serial,
                                                   " is not newer than the one held (",
                                                   impl_->revoked_.serial, ")"));
    }
  }
  impl_->Publish(changes);
  return absl::OkStatus();
}

}  // namespace skipswarm::membership
