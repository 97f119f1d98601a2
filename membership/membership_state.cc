// The member table of Membership::Impl: applying records, opinions and link
// samples (Note [SWIM in SkipSwarm] in membership_impl.h), and views.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "membership/membership_impl.h"

namespace skipswarm::membership {
namespace {

int Rank(proto::MemberState s) {
  switch (s) {
    case proto::MEMBER_STATE_SUSPECT: return 1;
    case proto::MEMBER_STATE_DEAD: return 2;
    case proto::MEMBER_STATE_LEFT: return 3;
    default: return 0;
  }
}

}  // namespace

absl::Status Membership::Impl::SignSelfLocked(uint64_t min_incarnation,
                                              proto::MemberState state) {
  Member& me = members_[self_];
  proto::NodeRecord record = me.record;
  // Note [Incarnation bounds]: saturate, never wrap.
  const uint64_t next =
      std::max(std::min(record.incarnation(), kMaxIncarnation) + 1,
               min_incarnation);
  if (next > kMaxIncarnation) {
    return absl::FailedPreconditionError(
        "incarnation at its ceiling: the record stays as it is");
  }
  record.set_incarnation(next);
  record.set_state(state);
  absl::StatusOr<proto::SignedNodeRecord> signed_record =
      SignRecord(*identity_, record, clock_->Now());
  if (!signed_record.ok()) return signed_record.status();
  me.id = self_;
  me.signed_record = *std::move(signed_record);
  me.record.ParseFromString(me.signed_record.record());
  me.state = state;
  me.state_since = clock_->SteadyNow();
  broadcasts_.QueueRecord(self_, me.signed_record);
  ++version_;
  me.record_version = version_;  // Note [Replies bring news]
  return absl::OkStatus();
}

absl::StatusOr<VerifiedRecords> Membership::Impl::PrepareGossip(
    const proto::Gossip& gossip, int max_records, const SenderRecordCheck* sender_record) {
  // Headroom over what an honest sender puts in: its news, plus the
  // extras of acks and push-pulls (our record, opinions for digests).
  max_records += options_.max_records_per_message + 1;
  const int max_updates = 2 * options_.max_updates_per_message + 1;
  if (gossip.records_size() > max_records ||
      gossip.updates_size() > max_updates ||
      gossip.links_size() > kMaxIncomingLinks) {
    absl::MutexLock lock(&mu_);
    ++stats_.messages_refused;
    LOG_EVERY_N(WARNING, 20) << "membership " << self_ << ": refused gossip of "
                             << gossip.records_size() << " records, "
                             << gossip.updates_size() << " opinions, "
                             << gossip.links_size() << " link samples";
    return absl::InvalidArgumentError(absl::StrCat(
        "gossip over the limits: ", gossip.records_size(), " records (max ",
        max_records, "), ", gossip.updates_size(), " opinions (max ",
        max_updates, "), ", gossip.links_size(),
        " link samples (max ", kMaxIncomingLinks, ")"));
  }
  VerifiedRecords out;
  out.results.resize(gossip.records_size());
  std::vector<int> news;
  uint64_t held_serial = 0;
  bool same_list = false;
  {
    absl::MutexLock lock(&mu_);
    for (int i = 0; i < gossip.records_size(); ++i) {
      if (!IsOldNewsLocked(gossip.records(i))) news.push_back(i);
    }
    // The sender's record, if RateLimit verified it, was counted there.
    const bool reused = sender_record != nullptr && sender_record->result.has_value() &&
                        std::find(news.begin(), news.end(), sender_record->index) != news.end();
    stats_.signatures_checked += news.size() - (reused ? 1 : 0);
    held_serial = revoked_.serial;
    same_list = gossip.has_revocations() &&
                gossip.revocations().signature() == revocations_.signature();
  }
  const absl::Time now = clock_->Now();
  for (int i : news) {
    if (sender_record != nullptr && sender_record->index == i &&
        sender_record->result.has_value()) {
      out.results[i] = *sender_record->result;  // verified once, by RateLimit
      continue;
    }
    out.results[i] = VerifyRecord(gossip.records(i), options_.policy, now);
  }
  // Note [Revocation]: one list per message, checked only when newer.
  if (gossip.has_revocations() && !same_list &&
      PeekRevocationSerial(gossip.revocations()) > held_serial) {
    out.revocations = VerifyRevocations(gossip.revocations(), options_.policy.admission);
  }
  return out;
}

absl::Status Membership::Impl::RateLimit(const common::NodeId& sender, uint64_t bytes,
                                         const proto::Gossip& gossip,
                                         SenderRecordCheck* sender_record) {
  return quota_->AdmitJoiner(
      sender, bytes, [&] { return CarriesOwnAdmissibleRecord(sender, gossip, sender_record); });
}

bool Membership::Impl::CarriesOwnAdmissibleRecord(const common::NodeId& sender,
                                                  const proto::Gossip& gossip,
                                                  SenderRecordCheck* check) {
  const std::string id = sender.Bytes();
  for (int i = 0; i < gossip.records_size(); ++i) {
    proto::NodeRecord record;
    if (!record.ParseFromString(gossip.records(i).record()) || record.node_id() != id) continue;
    {
      absl::MutexLock lock(&mu_);
      ++stats_.signatures_checked;
    }
    check->index = i;
    check->result = VerifyRecord(gossip.records(i), options_.policy, clock_->Now());
    return check->result->ok();
  }
  return false;
}

void Membership::Impl::ApplyGossipLocked(const proto::Gossip& gossip,
                                         const common::NodeId& sender,
                                         Changes* changes,
                                         const VerifiedRecords* verified) {
  // A newer revocation list first: it may refuse records in this message.
  if (verified != nullptr && verified->revocations.has_value()) {
    if (verified->revocations->ok()) {
      ApplyRevocationsLocked(gossip.revocations(), **verified->revocations, changes);
    } else {
      ++stats_.revocations_rejected;
      LOG_EVERY_N(WARNING, 20) << "membership " << self_ << ": refused a revocation list: "
                               << verified->revocations->status();
    }
  }
  for (int i = 0; i < gossip.records_size(); ++i) {
    ApplyRecordLocked(gossip.records(i), changes,
                      verified != nullptr &&
                              i < static_cast<int>(verified->results.size())
                          ? &verified->results[i]
                          : nullptr);
  }
  for (const proto::MembershipUpdate& u : gossip.updates()) {
    absl::StatusOr<common::NodeId> id = common::NodeId::FromBytes(u.node_id());
    if (!id.ok()) continue;
    if (u.state() != proto::MEMBER_STATE_SUSPECT &&
        u.state() != proto::MEMBER_STATE_DEAD) {
      continue;  // opinions are only ever suspicion or death
    }
    absl::StatusOr<common::NodeId> reporter =
        common::NodeId::FromBytes(u.reporter());
    if (!reporter.ok() || *reporter == self_) continue;
    ApplyOpinionLocked(*id, u.state(), u.incarnation(), *reporter,
                       /*first_hand=*/false, changes, &u);
    if (*id == self_) NoteOpinionAboutUsLocked(sender, u.incarnation());
  }
  for (const proto::LinkSample& s : gossip.links()) {
    if (s.from() != sender.Bytes()) continue;  // first-hand only
    absl::StatusOr<common::NodeId> to = common::NodeId::FromBytes(s.to());
    if (!to.ok() || !members_.contains(*to) || !members_.contains(sender)) {
      continue;
    }
    proto::LinkSample& slot = links_[{sender, *to}];
    if (s.measured_at_unix_ms() >= slot.measured_at_unix_ms()) slot = s;
  }
}

bool Membership::Impl::IsOldNewsLocked(
    const proto::SignedNodeRecord& signed_record) const {
  if (signed_record.record().size() > kMaxRecordBytes) return false;  // refused later
  proto::NodeRecord peek;
  if (!peek.ParseFromString(signed_record.record())) return false;
  absl::StatusOr<common::NodeId> id = common::NodeId::FromBytes(peek.node_id());
  if (!id.ok()) return false;
  auto it = members_.find(*id);
  return it != members_.end() &&
         (it->second.incarnation() > peek.incarnation() ||
          it->second.signed_record.signature() == signed_record.signature());
}

void Membership::Impl::ApplyRecordLocked(
    const proto::SignedNodeRecord& signed_record, Changes* changes,
    const std::optional<absl::StatusOr<proto::NodeRecord>>* verified) {
  // Gossip repeats itself: skip the signature check for what we hold.
  if (IsOldNewsLocked(signed_record)) return;  // duplicate or older
  absl::StatusOr<proto::NodeRecord> record =
      verified != nullptr && verified->has_value()
          ? **verified
          : (++stats_.signatures_checked,
             VerifyRecord(signed_record, options_.policy, clock_->Now()));
  if (!record.ok()) {
    ++stats_.records_rejected;
    if (absl::IsPermissionDenied(record.status())) ++stats_.admission_refused;
    LOG_EVERY_N(WARNING, 20) << "membership " << self_
                             << ": rejected node record: " << record.status();
    return;
  }
  const common::NodeId id = *common::NodeId::FromBytes(record->node_id());
  if (id == self_) {
    // Our own record from an earlier life (or clock skew): outbid it.
    if (record->incarnation() >= members_[self_].incarnation()) {
      SignSelfLocked(record->incarnation() + 1, members_[self_].state)
          .IgnoreError();
    }
    return;
  }
  if (IsRevokedLocked(id, record->invite())) {  // Note [Revocation]
    ++stats_.records_rejected;
    ++stats_.admission_refused;
    return;
  }
  auto it = members_.find(id);
  const bool is_new = it == members_.end();
  if (!is_new) {
    absl::Status newer = CheckNewer(it->second.incarnation(), *record);
    if (!newer.ok()) {
      if (absl::IsFailedPrecondition(newer)) ++stats_.records_rejected;
      return;
    }
  }
  Member& m = members_[id];
  const proto::MemberState old_state = is_new ? proto::MEMBER_STATE_UNSPECIFIED
                                              : m.state;
  m.id = id;
  m.signed_record = signed_record;
  m.record = *std::move(record);
  if (m.suspicion_timer != common::kNoTimer) {
    clock_->Cancel(m.suspicion_timer);
    m.suspicion_timer = common::kNoTimer;
  }
  m.suspicion.reset();
  m.admitted_until = AdmittedUntil(options_.policy.admission, id, m.record.invite());
  const proto::MemberState new_state = OwnerState(m.record);
  if (new_state != old_state) m.state_since = clock_->SteadyNow();
  m.state = new_state;
  broadcasts_.QueueRecord(id, signed_record);
  ++version_;
  m.record_version = version_;  // Note [Replies bring news]
  changes->push_back({id, old_state, new_state, /*record_changed=*/true});
}

void Membership::Impl::ApplyOpinionLocked(const common::NodeId& id,
                                          proto::MemberState state,
                                          uint64_t incarnation,
                                          const common::NodeId& reporter,
                                          bool first_hand, Changes* changes,
                                          const proto::MembershipUpdate* heard) {
  if (id == self_) {
    Member& me = members_[self_];
    if (me.state == proto::MEMBER_STATE_LEFT) return;
    // Note [Incarnation bounds]: only our own incarnation, or a signed
    // member's opinion of an earlier life's, is worth a refutation.
    const bool ours = incarnation == me.incarnation();
    const bool earlier_life =
        incarnation > me.incarnation() &&
        incarnation - me.incarnation() <= kMaxRefutationJump &&
        (first_hand ||
         (heard != nullptr ? OpinionAuthenticLocked(*heard)
                           : IsLiveMemberLocked(reporter)));  // a digest
    if (!ours && !earlier_life) {
      if (incarnation > me.incarnation()) ++stats_.opinions_rejected;
      return;
    }
    {
      // Refute: "I am alive", with a newer incarnation than the rumour.
      ++stats_.refutations;
      AdjustHealthLocked(+1);  // others find us slow: probe less eagerly
      SignSelfLocked(incarnation + 1, proto::MEMBER_STATE_ALIVE).IgnoreError();
      // Note [Refutation over our own requests]: to every member at once,
      // and we keep talking while a suspicion about us can last.
      last_refuted_ = clock_->SteadyNow();
      for (const common::NodeId& p : DialableOthersLocked()) {
        Member& m = members_[p];
        if (!m.owes_our_record) {
          m.owes_our_record = true;
          SendOwedRecordLater(p);
        }
      }
    }
    return;
  }
  auto it = members_.find(id);
  if (it == members_.end()) return;
  Member& m = it->second;
  if (incarnation != m.incarnation()) return;  // see Note
  if (m.state == proto::MEMBER_STATE_LEFT) return;
  if (!first_hand) {
    // Hearsay: signed by a live member, or nothing (see Note).
    if (heard == nullptr || reporter.IsZero()) return;
    const bool could_matter =
        (m.state == proto::MEMBER_STATE_SUSPECT && m.suspicion.has_value() &&
         !m.suspicion->HasReporter(reporter)) ||
        Rank(state) > Rank(m.state);
    if (!could_matter) return;  // (skips the signature check of repeats)
    if (!OpinionAuthenticLocked(*heard)) {
      ++stats_.opinions_rejected;
      return;
    }
  }
  const proto::MembershipUpdate signed_update =
      first_hand ? OwnOpinionLocked(m, state) : *heard;
  if (m.state == proto::MEMBER_STATE_SUSPECT &&
      (state == proto::MEMBER_STATE_SUSPECT ||
       (state == proto::MEMBER_STATE_DEAD && !first_hand))) {
    // Another member's suspicion (or its verdict) about what we suspect:
    // an independent confirmation if the reporter is new (Note [Dynamic
    // suspicion]); it shortens our timeout and is passed on.
    if (m.suspicion.has_value() && m.suspicion->Confirm(reporter)) {
      ++stats_.confirmations;
      ArmSuspicionTimerLocked(m);
      QueueOpinionLocked(m, signed_update);
      VLOG(1) << "membership " << self_ << ": " << id << " suspicion confirmed by "
              << reporter << " (" << m.suspicion->confirmations() << "), timeout "
              << m.suspicion->Timeout();
    }
    return;
  }
  if (Rank(state) <= Rank(m.state)) return;
  if (state == proto::MEMBER_STATE_DEAD && !first_hand) {
    // Someone else's verdict: at most a suspicion here, and our own timer
    // decides, which gives the member time to refute (see Note).
    if (m.state != proto::MEMBER_STATE_ALIVE) return;
    state = proto::MEMBER_STATE_SUSPECT;
  }
  SetStateLocked(m, state, reporter, changes);
  QueueOpinionLocked(m, signed_update);
  if (state == proto::MEMBER_STATE_SUSPECT && !first_hand) {
    // Note [Forged suspicion]: the suspect hears of it from us at once, so
    // a live one refutes to every member within a round trip; our own
    // probe still checks the rumour (Note [Dynamic suspicion]).
    NotifySuspectLater(id);
    if (std::find(probe_next_.begin(), probe_next_.end(), id) == probe_next_.end()) {
      probe_next_.push_back(id);
    }
  }
}

void Membership::Impl::QueueOpinionLocked(
    Member& m, const proto::MembershipUpdate& signed_update) {
  m.opinion = signed_update;
  broadcasts_.QueueUpdate(m.id, signed_update);
}

proto::MembershipUpdate Membership::Impl::OwnOpinionLocked(
    const Member& m, proto::MemberState state) {
  proto::MembershipUpdate update;
  update.set_node_id(m.id.Bytes());
  update.set_state(state);
  update.set_incarnation(m.incarnation());
  // A failed signature (it does not fail with a valid key) leaves the
  // opinion unsigned: peers then ignore it and judge for themselves.
  absl::Status s = SignOpinion(*identity_, options_.policy.swarm_id, &update);
  if (!s.ok()) LOG(WARNING) << "membership " << self_ << ": " << s;
  return update;
}

bool Membership::Impl::IsLiveMemberLocked(const common::NodeId& id) const {
  if (id.IsZero() || id == self_) return false;
  auto it = members_.find(id);
  return it != members_.end() && it->second.live();
}

bool Membership::Impl::OpinionAuthenticLocked(const proto::MembershipUpdate& u) {
  absl::StatusOr<common::NodeId> reporter = common::NodeId::FromBytes(u.reporter());
  if (!reporter.ok() || *reporter == self_) return false;
  auto it = members_.find(*reporter);
  if (it == members_.end() || !it->second.live()) return false;  // members only
  return VerifyOpinion(u, options_.policy.swarm_id,
                       it->second.record.public_key())
      .ok();
}

void Membership::Impl::AddOpinionsForDigestsLocked(
    const google::protobuf::RepeatedPtrField<proto::RecordDigest>& digests,
    int limit, proto::Gossip* out) {
  int added = 0;
  for (const proto::RecordDigest& d : digests) {
    if (added >= limit) break;
    absl::StatusOr<common::NodeId> id = common::NodeId::FromBytes(d.node_id());
    if (!id.ok()) continue;
    auto it = members_.find(*id);
    if (it == members_.end()) continue;
    const Member& m = it->second;
    if ((m.state != proto::MEMBER_STATE_SUSPECT &&
         m.state != proto::MEMBER_STATE_DEAD) ||
        m.opinion.incarnation() != m.incarnation() ||
        d.incarnation() != m.incarnation() || Rank(d.state()) >= Rank(m.state)) {
      continue;
    }
    *out->add_updates() = m.opinion;
    ++added;
  }
}

void Membership::Impl::SetStateLocked(Member& m, proto::MemberState state,
                                      const common::NodeId& reporter,
                                      Changes* changes) {
  const proto::MemberState old_state = m.state;
  m.state = state;
  m.state_since = clock_->SteadyNow();
  ++version_;
  if (m.suspicion_timer != common::kNoTimer) {
    clock_->Cancel(m.suspicion_timer);
    m.suspicion_timer = common::kNoTimer;
  }
  m.suspicion.reset();
  if (state == proto::MEMBER_STATE_SUSPECT) {
    m.suspicion.emplace(
        reporter, clock_->SteadyNow(),
        ComputeSuspicionBounds(options_.suspicion_timeout,
                               options_.suspicion_max_multiplier,
                               options_.suspicion_confirmations,
                               LiveCountLocked()));
    m.deferred = absl::ZeroDuration();
    m.witnesses.clear();
    m.checking = false;
    ArmSuspicionTimerLocked(m);
  }
  changes->push_back({m.id, old_state, state, false});
  VLOG(1) << "membership " << self_ << ": " << m.id << " "
          << proto::MemberState_Name(old_state) << " -> "
          << proto::MemberState_Name(state);
}

void Membership::Impl::ArmSuspicionTimerLocked(Member& m) {
  if (m.suspicion_timer != common::kNoTimer) clock_->Cancel(m.suspicion_timer);
  // A deadline already past fires at once (asynchronously).
  const absl::Duration deadline = m.suspicion->Deadline() + m.deferred;
  m.suspicion_timer = clock_->RunAt(
      deadline, Guard([this, id = m.id, inc = m.incarnation(), deadline] {
        OnSuspicionTimeout(id, inc, deadline);
      }));
}

bool Membership::Impl::SuspectLocked(const common::NodeId& id,
                                     uint64_t incarnation, Changes* changes) {
  auto it = members_.find(id);
  if (it == members_.end() || it->second.incarnation() != incarnation) {
    return false;
  }
  Member& m = it->second;
  if (m.state == proto::MEMBER_STATE_ALIVE) {
    ++stats_.suspicions;
    ApplyOpinionLocked(id, proto::MEMBER_STATE_SUSPECT, incarnation, self_,
                       /*first_hand=*/true, changes);
    return true;
  }
  // Already suspected (by hearsay): our failed probe confirms it.
  if (m.state != proto::MEMBER_STATE_SUSPECT) return false;
  const uint64_t before = stats_.confirmations;
  ApplyOpinionLocked(id, proto::MEMBER_STATE_SUSPECT, incarnation, self_,
                     /*first_hand=*/true, changes);
  return stats_.confirmations != before;
}

void Membership::Impl::OnSuspicionTimeout(const common::NodeId& id,
                                          uint64_t incarnation,
                                          absl::Duration deadline) {
  Changes changes;
  std::optional<PeerRef> check;  // hearsay: pull from it before the verdict
  {
    absl::MutexLock lock(&mu_);
    auto it = members_.find(id);
    if (it == members_.end() || it->second.state != proto::MEMBER_STATE_SUSPECT ||
        it->second.incarnation() != incarnation) {
      return;
    }
    Member& m = it->second;
    m.suspicion_timer = common::kNoTimer;
    const absl::Duration lateness = clock_->SteadyNow() - deadline;
    if (lateness > LateTimerThreshold() && m.suspicion.has_value() &&
        m.deferred < m.suspicion->bounds().max) {
      // We did not run for `lateness`: the refutation may be waiting in our
      // queues. Give the time back (Note [Dynamic suspicion], late timers).
      ++stats_.deferred_verdicts;
      ObserveLatenessLocked(lateness);
      const absl::Duration until = clock_->SteadyNow() + lateness;
      m.deferred = std::min(until - m.suspicion->Deadline(),
                            m.suspicion->bounds().max);
      ArmSuspicionTimerLocked(m);
      return;
    }
    if (m.checking) return;  // the check in flight decides
    // Pull the freshest records first (Note [Checked verdicts]).
    check = PickWitnessLocked(m);
    if (!check.has_value()) {
      ApplyOpinionLocked(id, proto::MEMBER_STATE_DEAD, incarnation, self_,
                         /*first_hand=*/true, &changes);
    }
  }
  if (check.has_value()) {
    PushPull(*check, [this, id, incarnation](absl::Status pulled) {
      OnVerdictCheck(id, incarnation, pulled);
    });
    return;
  }
  Publish(changes);
}

std::optional<PeerRef> Membership::Impl::PickWitnessLocked(Member& suspect) {
  if (static_cast<int>(suspect.witnesses.size()) >= std::max(options_.indirect_probes, 1)) {
    return std::nullopt;
  }
  std::vector<common::NodeId> answered, others;
  for (const common::NodeId& p : DialableOthersLocked()) {
    if (p == suspect.id || std::find(suspect.witnesses.begin(), suspect.witnesses.end(), p) !=
                               suspect.witnesses.end()) {
      continue;
    }
    (link_stats_.Rtt(p) != absl::InfiniteDuration() ? answered : others).push_back(p);
  }
  std::sort(answered.begin(), answered.end());  // hash order is not deterministic
  std::sort(others.begin(), others.end());
  const std::vector<common::NodeId>& pool = answered.empty() ? others : answered;
  if (pool.empty()) return std::nullopt;
  const common::NodeId& w = pool[rng_.UniformInt(0, static_cast<int64_t>(pool.size()) - 1)];
  suspect.witnesses.push_back(w);
  suspect.checking = true;
  return RefLocked(members_[w]);
}

void Membership::Impl::OnVerdictCheck(const common::NodeId& id, uint64_t incarnation,
                                      absl::Status pulled) {
  Changes changes;
  std::optional<PeerRef> check;
  {
    absl::MutexLock lock(&mu_);
    auto it = members_.find(id);
    if (it == members_.end()) return;
    it->second.checking = false;
    // Refuted, or a timer re-armed meanwhile (it decides): no verdict here.
    if (stopped_ || it->second.state != proto::MEMBER_STATE_SUSPECT ||
        it->second.incarnation() != incarnation ||
        it->second.suspicion_timer != common::kNoTimer) {
      return;
    }
    // A failed check tells nothing: ask the next witness (see Note).
    if (!pulled.ok()) check = PickWitnessLocked(it->second);
    if (!check.has_value()) {
      ApplyOpinionLocked(id, proto::MEMBER_STATE_DEAD, incarnation, self_,
                         /*first_hand=*/true, &changes);
    }
  }
  if (check.has_value()) {
    PushPull(*check, [this, id, incarnation](absl::Status again) {
      OnVerdictCheck(id, incarnation, again);
    });
    return;
  }
  Publish(changes);
}

void Membership::Impl::HeardFromLocked(const common::NodeId& sender) {
  auto it = members_.find(sender);
  if (it != members_.end()) it->second.last_heard = clock_->SteadyNow();
  last_dialed_ = clock_->SteadyNow();
  if (it == members_.end() ||
      it->second.state != proto::MEMBER_STATE_SUSPECT ||
      !it->second.suspicion.has_value()) {
    return;
  }
  Member& m = it->second;
  const absl::Duration before = m.suspicion->Deadline();
  m.suspicion->HeardFromSuspect(clock_->SteadyNow());
  if (m.suspicion->Deadline() != before) ArmSuspicionTimerLocked(m);
}

absl::Duration Membership::Impl::OutboundSilenceLimitLocked() const {
  const int live = LiveCountLocked();
  return std::max(ProbeIntervalLocked() * (3 * live + 6), absl::Seconds(3));
}

void Membership::Impl::SuspectSilentOutboundOnlyLocked(Changes* changes) {
  // Nobody can dial us either: we hear no member first-hand, so silence
  // says nothing (see Note).
  if (members_[self_].record.outbound_only()) return;
  const absl::Duration now = clock_->SteadyNow();
  const absl::Duration limit = OutboundSilenceLimitLocked();
  std::vector<std::pair<common::NodeId, uint64_t>> silent;
  for (const auto& [id, m] : members_) {
    if (id == self_ || m.state != proto::MEMBER_STATE_ALIVE || !m.record.outbound_only()) {
      continue;
    }
    if (now - std::max(m.last_heard, m.state_since) > limit) {
      silent.push_back({id, m.incarnation()});
    }
  }
  for (const auto& [id, incarnation] : silent) SuspectLocked(id, incarnation, changes);
}

int Membership::Impl::LiveCountLocked() const {
  int n = 0;
  for (const auto& [id, m] : members_) n += m.live() ? 1 : 0;
  return n;
}

void Membership::Impl::FillGossipLocked(proto::Gossip* out) {
  size_t live = 0;
  for (const auto& [id, m] : members_) live += m.live() ? 1 : 0;
  const int limit = options_.retransmit_mult *
                    static_cast<int>(std::ceil(std::log10(live + 1.0)));
  broadcasts_.Fill(std::max(limit, 1), options_.max_records_per_message,
                   options_.max_updates_per_message, out);
  if (revocation_sends_ > 0) {  // Note [Revocation]
    --revocation_sends_;
    AddRevocationsLocked(out);
  }
  // Our own measurements, a window at a time (they can outnumber the limit).
  if (options_.max_links_per_message <= 0) return;  // (none wanted: skip the copy)
  std::vector<proto::LinkSample> samples = link_stats_.Samples(self_);
  const size_t n = samples.size();
  const size_t take = std::min(n, static_cast<size_t>(options_.max_links_per_message));
  for (size_t i = 0; i < take; ++i) {
    *out->add_links() = samples[(link_cursor_ + i) % n];
  }
  if (n > 0) link_cursor_ = (link_cursor_ + take) % n;
}

void Membership::Impl::AddOpinionAboutLocked(const common::NodeId& peer,
                                             proto::Gossip* out) {
  auto it = members_.find(peer);
  if (it == members_.end()) return;
  Member& m = it->second;
  if (m.owes_our_record) {  // Note [Refutation over our own requests]
    m.owes_our_record = false;
    *out->add_records() = members_[self_].signed_record;
  }
  if (m.state != proto::MEMBER_STATE_SUSPECT &&
      m.state != proto::MEMBER_STATE_DEAD) {
    return;
  }
  if (m.opinion.incarnation() != m.incarnation() ||
      m.opinion.state() != m.state || m.opinion.signature().empty()) {
    m.opinion = OwnOpinionLocked(m, m.state);
  }
  *out->add_updates() = m.opinion;
}

void Membership::Impl::AddRecordsSinceLastReplyLocked(const common::NodeId& peer,
                                                      proto::Gossip* out) {
  auto it = members_.find(peer);
  if (it == members_.end() || !it->second.record.outbound_only()) return;
  const uint64_t since = it->second.replied_version;
  std::vector<std::pair<uint64_t, const Member*>> changed;
  for (const auto& [id, m] : members_) {
    // A DEAD member's record says "alive" (see HandlePushPull).
    if (id == peer || m.record_version <= since || m.state == proto::MEMBER_STATE_DEAD) continue;
    changed.push_back({m.record_version, &m});
  }
  std::sort(changed.begin(), changed.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  const size_t limit = std::max(options_.max_records_per_message / 2, 1);
  uint64_t upto = version_;
  for (size_t i = 0; i < changed.size(); ++i) {
    if (i == limit) {
      upto = changed[i].first - 1;  // the rest in the next reply
      break;
    }
    *out->add_records() = changed[i].second->signed_record;
  }
  it->second.replied_version = upto;
}

void Membership::Impl::NoteOpinionAboutUsLocked(const common::NodeId& sender,
                                                uint64_t incarnation) {
  const Member& me = members_[self_];
  if (me.state == proto::MEMBER_STATE_LEFT || incarnation >= me.incarnation()) return;
  auto it = members_.find(sender);
  if (sender == self_ || it == members_.end() || !it->second.live()) return;
  if (!it->second.owes_our_record) {
    it->second.owes_our_record = true;
    SendOwedRecordLater(sender);
  }
}

std::vector<proto::RecordDigest> Membership::Impl::DigestsLocked() const {
  std::vector<std::pair<common::NodeId, const Member*>> sorted;
  sorted.reserve(members_.size());
  for (const auto& [id, m] : members_) sorted.push_back({id, &m});
  // Id order: hash order is not deterministic across runs.
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<proto::RecordDigest> out;
  out.reserve(sorted.size());
  for (const auto& [id, m] : sorted) {
    proto::RecordDigest d;
    d.set_node_id(id.Bytes());
    d.set_incarnation(m->incarnation());
    d.set_state(m->state);
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<std::pair<common::NodeId, const Membership::Impl::Member*>>
Membership::Impl::MembersForPushPullLocked(const common::NodeId& peer) const {
  std::vector<std::pair<common::NodeId, const Member*>> out;
  out.reserve(members_.size());
  for (const auto& [id, m] : members_) out.push_back({id, &m});
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  auto from = std::lower_bound(out.begin(), out.end(), peer,
                               [](const auto& a, const common::NodeId& p) { return a.first < p; });
  std::rotate(out.begin(), from, out.end());
  return out;
}

std::vector<common::NodeId> Membership::Impl::DialableOthersLocked() const {
  std::vector<common::NodeId> out;
  for (const auto& [id, m] : members_) {
    if (id != self_ && m.live() && !m.record.outbound_only()) out.push_back(id);
  }
  std::sort(out.begin(), out.end());  // hash order is not deterministic
  return out;
}

PeerRef Membership::Impl::RefLocked(const Member& m) const {
  return PeerRef{m.record.addresses_size() > 0 ? m.record.addresses(0) : "",
                 m.id};
}

void Membership::Impl::EvictUnadmittedLocked(Changes* changes) {
  const absl::Time now = clock_->Now();
  std::vector<std::pair<common::NodeId, absl::Time>> ended;
  for (const auto& [id, m] : members_) {
    if (id != self_ && now >= m.admitted_until) ended.push_back({id, m.admitted_until});
  }
  std::sort(ended.begin(), ended.end());  // hash order is not deterministic
  for (const auto& [id, until] : ended) {
    EvictLocked(id, absl::StrCat("its invite expired at ", absl::FormatTime(until)), changes);
  }
  const absl::Time mine =
      AdmittedUntil(options_.policy.admission, self_, members_[self_].record.invite());
  if (now >= mine && !warned_self_unadmitted_) {
    warned_self_unadmitted_ = true;
    if (self_admission_.ok()) {
      self_admission_ = absl::FailedPreconditionError(
          absl::StrCat("this node's invite expired at ", absl::FormatTime(mine),
                       "; members refuse and evict it. Restart it with a fresh --invite"));
    }
    LOG(ERROR) << "membership " << self_ << ": this node's invite expired at "
               << absl::FormatTime(mine)
               << "; members refuse and evict it. Restart it with a fresh --invite";
  }
}

void Membership::Impl::EvictLocked(const common::NodeId& id, absl::string_view why,
                                   Changes* changes) {
  auto it = members_.find(id);
  if (it == members_.end() || id == self_) return;
  if (it->second.suspicion_timer != common::kNoTimer) clock_->Cancel(it->second.suspicion_timer);
  const proto::MemberState old_state = it->second.state;
  members_.erase(it);
  link_stats_.Forget(id);
  for (auto l = links_.begin(); l != links_.end();) {
    auto next = std::next(l);
    if (l->first.first == id || l->first.second == id) links_.erase(l);
    l = next;
  }
  probe_next_.erase(std::remove(probe_next_.begin(), probe_next_.end(), id), probe_next_.end());
  ++stats_.evicted;
  ++version_;
  changes->push_back({id, old_state, proto::MEMBER_STATE_DEAD, /*record_changed=*/false});
  LOG(WARNING) << "membership " << self_ << ": evicted " << id << ": " << why;
}

void Membership::Impl::CollectGarbageLocked() {
  const absl::Duration now = clock_->SteadyNow();
  std::vector<common::NodeId> gone;
  for (const auto& [id, m] : members_) {
    if (!m.live() && id != self_ &&
        now - m.state_since > options_.dead_retention) {
      gone.push_back(id);
    }
  }
  for (const common::NodeId& id : gone) {
    members_.erase(id);
    link_stats_.Forget(id);
  }
  if (gone.empty()) return;
  for (auto it = links_.begin(); it != links_.end();) {
    auto next = std::next(it);
    if (!members_.contains(it->first.first) ||
        !members_.contains(it->first.second)) {
      links_.erase(it);
    }
    it = next;
  }
}

View Membership::Impl::ViewLocked() const {
  View view;
  view.self = self_;
  view.version = version_;
  for (const auto& [id, m] : members_) {
    MemberInfo info;
    info.id = id;
    info.state = m.state;
    info.incarnation = m.incarnation();
    info.addresses.assign(m.record.addresses().begin(),
                          m.record.addresses().end());
    info.outbound_only = m.record.outbound_only();
    info.paused = m.record.paused();
    info.leaving = m.record.leaving();
    info.stopping = m.record.stopping();
    info.stop_after = m.record.stop_after();
    info.entering = m.record.entering();
    info.stages.assign(m.record.stages().begin(), m.record.stages().end());
    info.subnetwork = m.record.subnetwork();
    info.verify_frames = m.record.verify_frames();
    info.sign_frames = m.record.sign_frames();
    info.public_key = m.record.public_key();
    info.memory_slots = m.record.memory_slots();
    info.seconds_per_layer_per_sample = m.record.seconds_per_layer_per_sample();
    for (const auto& [stage, digest] : m.record.stage_digests()) {
      info.stage_digests[stage] = digest;
    }
    info.iteration = m.record.iteration();
    for (const std::string& r : m.record.relays()) {
      if (absl::StatusOr<common::NodeId> id = common::NodeId::FromBytes(r); id.ok()) {
        info.relays.push_back(*id);
      }
    }
    for (const std::string& v : m.record.vouches()) {
      if (absl::StatusOr<common::NodeId> id = common::NodeId::FromBytes(v); id.ok()) {
        info.vouches.push_back(*id);
      }
    }
    for (const std::string& b : m.record.bans()) {
      if (absl::StatusOr<common::NodeId> id = common::NodeId::FromBytes(b); id.ok()) {
        info.bans.push_back(*id);
      }
    }
    info.state_since = m.state_since;
    view.members.push_back(std::move(info));
  }
  std::sort(view.members.begin(), view.members.end(),
            [](const MemberInfo& a, const MemberInfo& b) { return a.id < b.id; });
  auto add_link = [&](const proto::LinkSample& s) {
    LinkInfo link;
    link.from = *common::NodeId::FromBytes(s.from());
    link.to = *common::NodeId::FromBytes(s.to());
    link.rtt = s.rtt_us() == 0 ? absl::InfiniteDuration()
                               : absl::Microseconds(s.rtt_us());
    link.bytes_per_second = s.bytes_per_second();
    link.measured_at = absl::FromUnixMillis(s.measured_at_unix_ms());
    link.throughput_measured_at = s.throughput_measured_at_unix_ms() > 0
                                      ? absl::FromUnixMillis(s.throughput_measured_at_unix_ms())
                                      : link.measured_at;
    view.links.push_back(link);
  };
  for (const proto::LinkSample& s : link_stats_.Samples(self_)) add_link(s);
  for (const auto& [key, s] : links_) add_link(s);
  std::sort(view.links.begin(), view.links.end(),
            [](const LinkInfo& a, const LinkInfo& b) {
              return std::tie(a.from, a.to) < std::tie(b.from, b.to);
            });
  return view;
}

void Membership::Impl::Publish(const Changes& changes) {
  // Counted like a guarded callback, so Shutdown waits for it; none after
  // Shutdown began (incoming requests publish too, unguarded).
  if (changes.empty() || !Enter()) return;
  for (const MemberChange& change : changes) {
    for (const Listener& listener : listeners_) listener(change);
  }
  Exit();
}

}  // namespace skipswarm::membership
