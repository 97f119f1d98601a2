// Membership's protocol: lifecycle, probing, gossip, anti-entropy, join,
// leave and the GossipHandler side. The table lives in membership_state.cc.
#include "membership/membership.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "glog/logging.h"
#include "membership/join_work.h"
#include "membership/membership_impl.h"
#include "proto/version.h"

namespace skipswarm::membership {


Membership::Impl::Impl(MembershipOptions options, const identity::Identity* identity,
                       GossipTransport* transport, common::Clock* clock,
                       common::Random rng)
    : options_(std::move(options)),
      identity_(identity),
      transport_(transport),
      clock_(clock),
      self_(identity->id()),
      rng_(std::move(rng)),
      link_stats_(options_.rtt_alpha, options_.throughput_alpha,
                  options_.throughput_restart_after) {
  timers_.assign(kTimerSlots, common::kNoTimer);
  common::PeerQuotaOptions q;
  q.service = "gossip";
  q.member = options_.member_quota;
  q.stranger = options_.stranger_quota;
  q.all_strangers = options_.all_strangers_quota;
  q.joiners = options_.joiners_quota;
  q.joiner = options_.joiner_quota;
  q.max_hold = options_.quota_max_hold;
  quota_ = std::make_unique<common::PeerQuota>(q, clock_);
  // The quota belongs to this Impl and is only used by its handlers.
  quota_->SetClassifier([this](const common::NodeId& id) {
    absl::MutexLock lock(&mu_);
    auto it = members_.find(id);
    return it != members_.end() && it->second.live() ? common::PeerClass::kMember
                                                     : common::PeerClass::kStranger;
  });
}

bool Membership::Impl::Enter() {
  absl::MutexLock lock(&life_mu_);
  if (destroyed_) return false;
  ++running_;
  return true;
}

void Membership::Impl::Exit() {
  absl::MutexLock lock(&life_mu_);
  --running_;
}

void Membership::Impl::Stop() {
  absl::MutexLock lock(&mu_);
  stopped_ = true;
  for (common::TimerId t : timers_) clock_->Cancel(t);
  for (auto& [id, m] : members_) {
    clock_->Cancel(m.suspicion_timer);
    m.suspicion_timer = common::kNoTimer;
  }
}

void Membership::Impl::Shutdown() {
  Stop();
  absl::MutexLock lock(&life_mu_);
  destroyed_ = true;
  // REQUIRES: not called from inside one of our own callbacks.
  life_mu_.Await(absl::Condition(
      +[](int* running) { return *running == 0; }, &running_));
}

// ---------------------------------------------------------------- timers

void Membership::Impl::ScheduleProbe() {
  absl::MutexLock lock(&mu_);
  if (stopped_) return;
  const absl::Duration deadline = clock_->SteadyNow() + ProbeIntervalLocked();
  timers_[kProbeTimer] = clock_->RunAt(
      deadline, Guard([this, deadline] { ProbeTick(deadline); }));
}

void Membership::Impl::ObserveLatenessLocked(absl::Duration lateness) {
  VLOG(1) << "membership " << self_ << ": our timer fired " << lateness
          << " late (this process stalled)";
  AdjustHealthLocked(+1);
}

void Membership::Impl::AdjustHealthLocked(int delta) {
  health_ = std::clamp(health_ + delta, 0, options_.max_health_score);
  stats_.health_score = health_;
}

absl::Duration Membership::Impl::ProbeIntervalLocked() const {
  return options_.probe_interval * (1 + health_);
}

void Membership::Impl::ScheduleGossip() {
  absl::MutexLock lock(&mu_);
  if (stopped_) return;
  timers_[kGossipTimer] = clock_->RunAfter(options_.gossip_interval,
                                           Guard([this] { GossipTick(); }));
}

void Membership::Impl::SchedulePushPull() {
  absl::MutexLock lock(&mu_);
  if (stopped_) return;
  // Jitter spreads anti-entropy of nodes started together.
  const absl::Duration delay =
      first_push_pull_done_
          ? options_.push_pull_interval * rng_.Uniform(0.75, 1.25)
          : options_.probe_interval * rng_.Uniform(1.0, 2.0);
  first_push_pull_done_ = true;
  timers_[kPushPullTimer] =
      clock_->RunAfter(delay, Guard([this] { PushPullTick(); }));
}

void Membership::Impl::ScheduleRefresh() {
  absl::MutexLock lock(&mu_);
  if (stopped_) return;
  // Re-sign well within the record horizon so peers never find it stale.
  timers_[kRefreshTimer] = clock_->RunAfter(
      options_.policy.max_age / 4, Guard([this] {
        {
          absl::MutexLock lock(&mu_);
          if (stopped_) return;
          SignSelfLocked(0, members_[self_].state).IgnoreError();
        }
        ScheduleRefresh();
      }));
}

void Membership::Impl::ScheduleReconnect() {
  absl::MutexLock lock(&mu_);
  if (stopped_) return;
  timers_[kReconnectTimer] = clock_->RunAfter(
      options_.reconnect_interval, Guard([this] {
        ScheduleReconnect();
        PeerRef to;
        {
          absl::MutexLock lock(&mu_);
          if (stopped_) return;
          std::vector<common::NodeId> dead;
          const absl::Duration now = clock_->SteadyNow();
          for (const auto& [id, m] : members_) {
            if (m.state == proto::MEMBER_STATE_DEAD &&
                now - m.state_since < options_.reconnect_window) {
              dead.push_back(id);
            }
          }
          if (dead.empty()) return;
          std::sort(dead.begin(), dead.end());
          to = RefLocked(members_[dead[rng_.UniformInt(
              0, static_cast<int64_t>(dead.size()) - 1)]]);
        }
        PushPull(to, [](absl::Status) {});
      }));
}

void Membership::Impl::ScheduleHeartbeat() {
  absl::MutexLock lock(&mu_);
  if (stopped_) return;
  timers_[kHeartbeatTimer] = clock_->RunAfter(options_.probe_interval,
                                              Guard([this] { HeartbeatTick(); }));
}

void Membership::Impl::HeartbeatTick() {
  ScheduleHeartbeat();
  PeerRef to;
  proto::PingRequest req;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    const absl::Duration now = clock_->SteadyNow();
    // Suspected lately (Note [Refutation over our own requests]): whoever
    // suspects us again can tell us only in a reply, so we ask every tick.
    const bool suspected =
        now - last_refuted_ <= ComputeSuspicionBounds(options_.suspicion_timeout,
                                                      options_.suspicion_max_multiplier,
                                                      options_.suspicion_confirmations,
                                                      LiveCountLocked())
                                   .max;
    const bool outbound_only = members_[self_].record.outbound_only();
    const bool undialed = !outbound_only && last_dialed_ == -absl::InfiniteDuration();
    if (!outbound_only && !suspected && !undialed) return;
    const std::vector<common::NodeId> peers = DialableOthersLocked();
    const Member* oldest = nullptr;
    for (const common::NodeId& id : peers) {  // id order: ties go the same way
      const Member& m = members_[id];
      if (oldest == nullptr || m.last_sent < oldest->last_sent) oldest = &m;
    }
    const int gap = suspected || undialed ? 1 : static_cast<int>(peers.size());
    if (oldest == nullptr || now - oldest->last_sent < options_.probe_interval * gap) {
      return;  // the probe rounds keep pace (see Note)
    }
    to = RefLocked(*oldest);
    req = NewPingLocked(++seq_);
    FillGossipLocked(req.mutable_gossip());
    AddOpinionAboutLocked(oldest->id, req.mutable_gossip());
    NoteSentLocked(oldest->id);
  }
  const absl::Duration sent_at = clock_->SteadyNow();
  transport_->Ping(to, req, options_.probe_interval,
                   Guard([this, id = to.id, sent_at](absl::StatusOr<proto::Ack> ack) {
                     OnNewsAck(id, sent_at, std::move(ack));
                   }));
}

void Membership::Impl::NoteSentLocked(const common::NodeId& id) {
  auto it = members_.find(id);
  if (it != members_.end()) it->second.last_sent = clock_->SteadyNow();
}

void Membership::Impl::OnNewsAck(const common::NodeId& id, absl::Duration sent_at,
                                 absl::StatusOr<proto::Ack> ack) {
  if (!ack.ok() || ack->from() != id.Bytes()) return;
  ObserveRtt(id, sent_at);
  Changes changes;
  absl::StatusOr<VerifiedRecords> verified =
      PrepareGossip(ack->gossip(), options_.max_records_per_message);
  if (!verified.ok()) return;
  {
    absl::MutexLock lock(&mu_);
    ApplyGossipLocked(ack->gossip(), id, &changes, &*verified);
  }
  Publish(changes);
}

proto::PingRequest Membership::Impl::NewPingLocked(uint64_t seq) {
  proto::PingRequest req;
  req.set_protocol_version(proto::kProtocolVersion);
  req.set_swarm_id(options_.policy.swarm_id);
  req.set_from(self_.Bytes());
  req.set_seq(seq);
  // Note [Admission]: a member that has not yet heard of us answers only a
  // request that proves we are admitted, so every ping carries our record
  // (old news to those that hold it: no signature check there).
  if (options_.policy.admission.mode != AdmissionMode::kOpen) {
    *req.mutable_gossip()->add_records() = members_[self_].signed_record;
  }
  return req;
}

void Membership::Impl::ObserveRtt(const common::NodeId& peer,
                                  absl::Duration sent_at) {
  absl::MutexLock lock(&mu_);
  link_stats_.ObserveRtt(peer, clock_->SteadyNow() - sent_at, clock_->Now());
}

// ---------------------------------------------------------------- probing

absl::Duration Membership::Impl::ProbeTimeout(const common::NodeId& peer) {
  // Far peers get longer: 3 smoothed RTTs, within [probe_timeout,
  // 60% of the period] so the indirect round still fits in the period.
  absl::MutexLock lock(&mu_);
  absl::Duration timeout = options_.probe_timeout;
  const absl::Duration rtt = link_stats_.Rtt(peer);
  if (rtt != absl::InfiniteDuration()) timeout = std::max(timeout, 3 * rtt);
  timeout *= 1 + health_;
  return std::min(timeout, ProbeIntervalLocked() * 0.6);
}

void Membership::Impl::ProbeTick(absl::Duration deadline) {
  PeerRef to;
  proto::PingRequest req;
  uint64_t incarnation = 0;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    // A late tick: we stalled, so acks may be late for reasons of ours.
    const absl::Duration lateness = clock_->SteadyNow() - deadline;
    if (lateness > LateTimerThreshold()) {
      ++stats_.late_ticks;
      ObserveLatenessLocked(lateness);
    }
  }
  ScheduleProbe();
  Changes silent;  // Note [Outbound-only members], Note [Eviction]
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    SuspectSilentOutboundOnlyLocked(&silent);
    EvictUnadmittedLocked(&silent);  // Note [Eviction]
  }
  Publish(silent);
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    CollectGarbageLocked();
    const Member* target = nullptr;
    while (target == nullptr && !probe_next_.empty()) {
      auto it = members_.find(probe_next_.front());
      probe_next_.erase(probe_next_.begin());
      if (it != members_.end() && it->second.live() && !it->second.record.outbound_only()) {
        target = &it->second;
      }
    }
    for (size_t tries = 0; target == nullptr && tries < 2; ++tries) {
      while (probe_index_ < probe_order_.size() && target == nullptr) {
        auto it = members_.find(probe_order_[probe_index_++]);
        if (it != members_.end() && it->second.live() && !it->second.record.outbound_only()) {
          target = &it->second;
        }
      }
      if (target == nullptr) {  // end of a round: reshuffle
        probe_order_ = DialableOthersLocked();
        rng_.Shuffle(probe_order_);
        probe_index_ = 0;
      }
    }
    if (target == nullptr) return;
    to = RefLocked(*target);
    incarnation = target->incarnation();
    NoteSentLocked(target->id);
    req = NewPingLocked(++seq_);
    FillGossipLocked(req.mutable_gossip());
    AddOpinionAboutLocked(target->id, req.mutable_gossip());
    ++stats_.probes;
  }
  const absl::Duration sent_at = clock_->SteadyNow();
  transport_->Ping(to, req, ProbeTimeout(to.id),
                   Guard([this, id = to.id, incarnation,
                          sent_at](absl::StatusOr<proto::Ack> ack) {
                     OnProbeResult(id, incarnation, sent_at, std::move(ack));
                   }));
}

void Membership::Impl::OnProbeResult(const common::NodeId& target,
                                     uint64_t incarnation,
                                     absl::Duration sent_at,
                                     absl::StatusOr<proto::Ack> ack) {
  if (ack.ok() && ack->from() == target.Bytes()) {
    ObserveRtt(target, sent_at);
    Changes changes;
    absl::StatusOr<VerifiedRecords> verified =
        PrepareGossip(ack->gossip(), options_.max_records_per_message);
    {
      absl::MutexLock lock(&mu_);
      AdjustHealthLocked(-1);
      if (verified.ok()) ApplyGossipLocked(ack->gossip(), target, &changes, &*verified);
    }
    Publish(changes);
    return;
  }
  VLOG(2) << "membership " << self_ << ": probe of " << target << " failed: "
          << (ack.ok() ? absl::UnauthenticatedError("wrong responder")
                       : ack.status());
  IndirectProbe(target, incarnation);
}

void Membership::Impl::IndirectProbe(const common::NodeId& target,
                                     uint64_t incarnation) {
  struct Round {
    int pending = 0;
    int asked = 0;
    int answered = 0;  // acks and nacks (target_alive = false)
    bool alive = false;
  };
  auto round = std::make_shared<Round>();
  std::vector<std::pair<PeerRef, proto::PingRequest>> sends;
  Changes changes;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    std::vector<common::NodeId> helpers = DialableOthersLocked();
    helpers.erase(std::remove(helpers.begin(), helpers.end(), target),
                  helpers.end());
    rng_.Shuffle(helpers);
    if (static_cast<int>(helpers.size()) > options_.indirect_probes) {
      helpers.resize(options_.indirect_probes);
    }
    bool notify = false;
    if (helpers.empty()) {
      AdjustHealthLocked(+1);
      notify = SuspectLocked(target, incarnation, &changes);
    }
    if (notify) NotifySuspectLater(target);
    for (const common::NodeId& h : helpers) {
      proto::PingRequest req = NewPingLocked(++seq_);
      req.set_target(target.Bytes());
      FillGossipLocked(req.mutable_gossip());
      NoteSentLocked(h);
      sends.push_back({RefLocked(members_[h]), std::move(req)});
      ++stats_.indirect_probes;
    }
    round->pending = round->asked = static_cast<int>(sends.size());
  }
  Publish(changes);
  absl::Duration interval;
  {
    absl::MutexLock lock(&mu_);
    interval = ProbeIntervalLocked();
  }
  const absl::Duration timeout =
      std::max(interval - ProbeTimeout(target), options_.probe_timeout);
  for (auto& [to, req] : sends) {
    transport_->PingReq(
        to, req, timeout,
        Guard([this, round, target, incarnation,
               helper = to.id](absl::StatusOr<proto::Ack> ack) {
          Changes changes;
          bool notify = false;
          const bool answered = ack.ok() && ack->from() == helper.Bytes();
          absl::StatusOr<VerifiedRecords> verified =
              answered ? PrepareGossip(ack->gossip(), options_.max_records_per_message)
                       : absl::StatusOr<VerifiedRecords>(VerifiedRecords());
          {
            absl::MutexLock lock(&mu_);
            if (answered) {
              if (verified.ok()) {
                ApplyGossipLocked(ack->gossip(), helper, &changes, &*verified);
              }
              round->alive |= ack->target_alive();
              ++round->answered;
            }
            if (--round->pending == 0 && !round->alive) {
              // Lifeguard: helpers that answered "no" (nacks) show that our
              // own messages get through; each silent one counts against us.
              AdjustHealthLocked(round->asked - round->answered);
              notify = SuspectLocked(target, incarnation, &changes);
            }
          }
          if (notify) NotifySuspectLater(target);
          Publish(changes);
        }));
  }
}

void Membership::Impl::NotifySuspectLater(const common::NodeId& target) {
  // Tell the suspect directly: if it is alive but its link is lossy, it
  // refutes within one round trip instead of waiting for gossip to reach it.
  clock_->RunAfter(absl::ZeroDuration(), Guard([this, target] {
    PeerRef to;
    proto::PingRequest req;
    absl::Duration timeout = options_.probe_interval;
    {
      absl::MutexLock lock(&mu_);
      auto it = members_.find(target);
      if (stopped_ || it == members_.end() ||
          it->second.state != proto::MEMBER_STATE_SUSPECT ||
          it->second.record.outbound_only()) {  // cannot be dialed: it hears in our acks
        return;
      }
      to = RefLocked(it->second);
      req = NewPingLocked(++seq_);
      AddOpinionAboutLocked(target, req.mutable_gossip());
      // As long as the suspicion can last: a suspect that was only slow
      // still gets its refutation back to us in the ack.
      if (it->second.suspicion.has_value()) {
        timeout = it->second.suspicion->bounds().max;
      }
    }
    transport_->Ping(to, req, timeout,
                     Guard([this, target](absl::StatusOr<proto::Ack> ack) {
                       if (!ack.ok() || ack->from() != target.Bytes()) return;
                       Changes changes;
                       absl::StatusOr<VerifiedRecords> verified = PrepareGossip(
                           ack->gossip(), options_.max_records_per_message);
                       if (!verified.ok()) return;
                       {
                         absl::MutexLock lock(&mu_);
                         ApplyGossipLocked(ack->gossip(), target, &changes, &*verified);
                       }
                       Publish(changes);
                     }));
  }));
}

void Membership::Impl::SendOwedRecordLater(const common::NodeId& peer) {
  // Not inline: the caller holds mu_, and a reply being built may pay the
  // debt first (Note [Refutation over our own requests]).
  clock_->RunAfter(absl::ZeroDuration(), Guard([this, peer] {
    PeerRef to;
    proto::PingRequest req;
    {
      absl::MutexLock lock(&mu_);
      auto it = members_.find(peer);
      // Paid already, or only its own requests reach it (their acks pay).
      if (stopped_ || it == members_.end() || !it->second.owes_our_record ||
          !it->second.live() || it->second.record.outbound_only()) {
        return;
      }
      to = RefLocked(it->second);
      req = NewPingLocked(++seq_);
      FillGossipLocked(req.mutable_gossip());
      AddOpinionAboutLocked(peer, req.mutable_gossip());
      NoteSentLocked(peer);
    }
    const absl::Duration sent_at = clock_->SteadyNow();
    transport_->Ping(to, req, options_.probe_interval,
                     Guard([this, peer, sent_at](absl::StatusOr<proto::Ack> ack) {
                       OnNewsAck(peer, sent_at, std::move(ack));
                     }));
  }));
}

// ---------------------------------------------------------------- gossip

void Membership::Impl::GossipTick() {
  ScheduleGossip();
  std::vector<std::pair<PeerRef, proto::PingRequest>> sends;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_ || broadcasts_.empty()) return;
    std::vector<common::NodeId> peers = DialableOthersLocked();
    rng_.Shuffle(peers);
    if (static_cast<int>(peers.size()) > options_.gossip_fanout) {
      peers.resize(options_.gossip_fanout);
    }
    for (const common::NodeId& p : peers) {
      proto::PingRequest req = NewPingLocked(++seq_);
      FillGossipLocked(req.mutable_gossip());
      AddOpinionAboutLocked(p, req.mutable_gossip());
      NoteSentLocked(p);
      sends.push_back({RefLocked(members_[p]), std::move(req)});
    }
  }
  const absl::Duration sent_at = clock_->SteadyNow();
  for (auto& [to, req] : sends) {
    transport_->Ping(to, req, options_.probe_timeout,
                     Guard([this, id = to.id,
                            sent_at](absl::StatusOr<proto::Ack> ack) {
                       OnNewsAck(id, sent_at, std::move(ack));
                     }));
  }
}

// ---------------------------------------------------------------- anti-entropy

void Membership::Impl::PushPullTick() {
  SchedulePushPull();
  PeerRef to;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    std::vector<common::NodeId> peers = DialableOthersLocked();
    if (peers.empty()) {
      // Alone (or everybody looks dead, e.g. after our own outage): try the
      // tombstones and the bootstrap list so two halves can find each other.
      for (const auto& [id, m] : members_) {
        if (id != self_ && m.state == proto::MEMBER_STATE_DEAD) {
          peers.push_back(id);
        }
      }
      std::sort(peers.begin(), peers.end());
    }
    if (!peers.empty()) {
      to = RefLocked(
          members_[peers[rng_.UniformInt(0, static_cast<int64_t>(peers.size()) - 1)]]);
    } else if (!bootstrap_.empty()) {
      to.address = bootstrap_[rng_.UniformInt(
          0, static_cast<int64_t>(bootstrap_.size()) - 1)];
    } else {
      return;
    }
  }
  PushPull(to, [](absl::Status) {});
}

void Membership::Impl::PushPull(const PeerRef& to,
                                absl::AnyInvocable<void(absl::Status)> done) {
  proto::PushPullRequest req;
  {
    absl::MutexLock lock(&mu_);
    req.set_protocol_version(proto::kProtocolVersion);
    req.set_swarm_id(options_.policy.swarm_id);
    req.set_from(self_.Bytes());
    for (proto::RecordDigest& d : DigestsLocked()) {
      *req.add_digests() = std::move(d);
    }
    *req.mutable_gossip()->add_records() = members_[self_].signed_record;
    AddRevocationsLocked(req.mutable_gossip());  // Note [Revocation]: anti-entropy
    if (!to.id.IsZero()) NoteSentLocked(to.id);
  }
  transport_->PushPull(
      to, req, options_.push_pull_timeout,
      Guard([this, to, done = std::move(done)](
                absl::StatusOr<proto::PushPullResponse> resp) mutable {
        if (!resp.ok()) {
          done(resp.status());
          return;
        }
        OnPushPullResponse(to, *std::move(resp));
        done(absl::OkStatus());
      }));
}

void Membership::Impl::OnPushPullResponse(const PeerRef& to,
                                          proto::PushPullResponse resp) {
  Changes changes;
  proto::PushPullRequest push_back;
  PeerRef back_to = to;
  absl::StatusOr<VerifiedRecords> verified =
      PrepareGossip(resp.gossip(), options_.max_push_pull_records);
  if (!verified.ok()) return;
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<common::NodeId> from = common::NodeId::FromBytes(resp.from());
    const common::NodeId sender = from.ok() ? *from : common::NodeId();
    ApplyGossipLocked(resp.gossip(), sender, &changes, &*verified);
    // What the responder lacks, we push back.
    absl::flat_hash_map<common::NodeId, uint64_t> theirs;
    for (const proto::RecordDigest& d : resp.digests()) {
      absl::StatusOr<common::NodeId> id = common::NodeId::FromBytes(d.node_id());
      if (!id.ok()) continue;
      theirs[*id] = d.incarnation();
      // Digests are unsigned: only one about us counts, as a reason to
      // refute (Note [Incarnation bounds]); opinions of others come signed.
      if (*id == self_ && (d.state() == proto::MEMBER_STATE_SUSPECT ||
                           d.state() == proto::MEMBER_STATE_DEAD)) {
        ApplyOpinionLocked(*id, d.state(), d.incarnation(), sender,
                           /*first_hand=*/false, &changes);
      }
    }
    AddOpinionsForDigestsLocked(resp.digests(), options_.max_updates_per_message,
                                push_back.mutable_gossip());
    for (const auto& [id, m] : MembersForPushPullLocked(sender)) {
      if (m->state == proto::MEMBER_STATE_DEAD) continue;  // see HandlePushPull
      auto it = theirs.find(id);
      if ((it == theirs.end() || it->second < m->incarnation()) &&
          push_back.gossip().records_size() < options_.max_push_pull_records) {
        *push_back.mutable_gossip()->add_records() = m->signed_record;
      }
    }
    if (back_to.id.IsZero()) back_to.id = sender;
    if (push_back.gossip().records_size() > 0 ||
        push_back.gossip().updates_size() > 0) {
      push_back.set_protocol_version(proto::kProtocolVersion);
      push_back.set_swarm_id(options_.policy.swarm_id);
      push_back.set_from(self_.Bytes());
      for (proto::RecordDigest& d : DigestsLocked()) {
        *push_back.add_digests() = std::move(d);
      }
    }
  }
  Publish(changes);
  if (push_back.gossip().records_size() > 0 ||
      push_back.gossip().updates_size() > 0) {
    transport_->PushPull(back_to, push_back, options_.push_pull_timeout,
                         Guard([](absl::StatusOr<proto::PushPullResponse>) {}));
  }
}

// ---------------------------------------------------------------- join

void Membership::Impl::JoinRound(std::shared_ptr<JoinState> join) {
  {
    absl::MutexLock lock(&join->mu);
    join->errors.assign(join->addresses.size(), "");
    join->pending = static_cast<int>(join->addresses.size());
    join->all_permanent = true;
    join->permanent = absl::OkStatus();
  }
  for (size_t i = 0; i < join->addresses.size(); ++i) {
    PushPull(PeerRef{join->addresses[i], common::NodeId()},
             [this, join, i](absl::Status status) {
               absl::AnyInvocable<void(absl::Status)> done;
               absl::Status result;
               bool retry = false;
               absl::Duration backoff = options_.join_backoff;
               {
                 absl::MutexLock lock(&join->mu);
                 if (join->finished) return;
                 if (status.ok()) {
                   join->finished = true;
                   LOG(INFO) << "membership " << self_ << ": joined via "
                             << join->addresses[i];
                   done = std::move(join->done);
                 } else {
                   join->errors[i] =
                       absl::StartsWith(status.message(), join->addresses[i])
                           ? status.ToString()
                           : absl::StrCat(join->addresses[i], ": ",
                                          status.ToString());
                   // Codes that mean "do not retry" (docs/ARCHITECTURE.md
                   // "Conventions").
                   const bool permanent =
                       absl::IsFailedPrecondition(status) ||
                       absl::IsPermissionDenied(status) ||
                       absl::IsUnauthenticated(status) ||
                       absl::IsInvalidArgument(status);
                   join->all_permanent &= permanent;
                   if (permanent && join->permanent.ok()) join->permanent = status;
                   if (--join->pending > 0) return;
                   if (join->all_permanent) {
                     join->finished = true;
                     done = std::move(join->done);
                     result = absl::Status(
                         join->permanent.code(),
                         absl::StrCat("cannot join (retrying will not help): ",
                                      absl::StrJoin(join->errors, "; ")));
                   } else if (++join->round >= options_.join_rounds) {
                     join->finished = true;
                     done = std::move(join->done);
                     result = absl::UnavailableError(absl::StrCat(
                         "could not join through any bootstrap peer after ",
                         join->round, " rounds; last errors: ",
                         absl::StrJoin(join->errors, "; ")));
                   } else {
                     retry = true;
                     for (int r = 1; r < join->round; ++r) backoff *= 2;
                     backoff = std::min(backoff, options_.join_backoff_max);
                   }
                 }
               }
               if (retry) {
                 clock_->RunAfter(backoff,
                                  Guard([this, join] { JoinRound(join); }));
               } else if (done) {
                 done(result);
               }
             });
  }
}

// ---------------------------------------------------------------- handlers

absl::Status Membership::Impl::CheckRequest(const PeerInfo& from, int version,
                                            const std::string& swarm_id,
                                            const std::string& from_id,
                                            common::NodeId* sender) {
  absl::Status status = proto::CheckProtocolVersion(version);
  if (status.ok() && swarm_id != options_.policy.swarm_id) {
    status = absl::FailedPreconditionError(
        "swarm id mismatch: the peer belongs to another swarm (check --swarm)");
  }
  if (status.ok()) {
    absl::StatusOr<common::NodeId> id = common::NodeId::FromBytes(from_id);
    if (!id.ok()) {
      status = absl::InvalidArgumentError("request has no valid sender id");
    } else if (!from.authenticated_id.IsZero() && from.authenticated_id != *id) {
      status = absl::UnauthenticatedError(absl::StrCat(
          "peer authenticated as ", from.authenticated_id.ShortString(),
          " but claims to be ", id->ShortString()));
    } else if (options_.policy.admission.mode == AdmissionMode::kAllowList) {
      // Note [Admission]: the id alone decides; nothing of it is read.
      status = CheckAdmission(options_.policy.admission, *id, proto::SignedInvite(),
                              clock_->Now());
    }
    if (status.ok()) *sender = *id;
  }
  if (!status.ok()) {
    absl::MutexLock lock(&mu_);
    ++stats_.requests_rejected;
    if (absl::IsPermissionDenied(status)) ++stats_.admission_refused;
    LOG_EVERY_N(WARNING, 20) << "membership " << self_
                             << ": rejected request from " << from.address
                             << ": " << status;
  }
  return status;
}

absl::Status Membership::Impl::CheckSenderAdmitted(const common::NodeId& sender,
                                                   const proto::Gossip& gossip,
                                                   const VerifiedRecords& verified) {
  const AdmissionPolicy& policy = options_.policy.admission;
  // Note [Revocation]: a revoked id is refused in every mode.
  auto refuse = [&](const absl::Status& refusal) {
    absl::MutexLock lock(&mu_);
    ++stats_.requests_rejected;
    ++stats_.admission_refused;
    LOG_EVERY_N(WARNING, 20) << "membership " << self_ << ": refused a request: " << refusal;
    return refusal;
  };
  uint64_t revoked_by = 0;
  {
    absl::MutexLock lock(&mu_);
    if (revoked_.nodes.contains(sender)) revoked_by = revoked_.serial;
  }
  if (revoked_by > 0) {
    return refuse(absl::PermissionDeniedError(
        absl::StrCat("node ", sender.ShortString(),
                     " is revoked by this swarm's founder (revocation list ", revoked_by, ")")));
  }
  // Note [Join work]: an open swarm that asks for work admits requests
  // only from senders whose record carries it, as a selective one does.
  if (policy.mode == AdmissionMode::kOpen && !NeedsJoinWork(policy, sender)) {
    return absl::OkStatus();
  }
  absl::Status refusal = absl::PermissionDeniedError(absl::StrCat(
      "node ", sender.ShortString(), " is not a member of this swarm (admission: ",
      AdmissionModeName(policy.mode),
      policy.mode == AdmissionMode::kOpen ? ", with join work" : "",
      ") and sent no record of itself"));
  // Its own record in this message, verified (admission included) outside
  // the lock by PrepareGossip; a refused one says why.
  for (size_t i = 0; i < verified.results.size(); ++i) {
    const std::optional<absl::StatusOr<proto::NodeRecord>>& r = verified.results[i];
    if (!r.has_value()) continue;  // old news: the table has it
    if (r->ok()) {
      if ((*r)->node_id() != sender.Bytes()) continue;
      absl::MutexLock lock(&mu_);
      if (!IsRevokedLocked(sender, (*r)->invite())) return absl::OkStatus();
      refusal = absl::PermissionDeniedError(absl::StrCat(
          "node ", sender.ShortString(), "'s invite is revoked by this swarm's founder "
          "(revocation list ", revoked_.serial, ")"));
      continue;
    }
    proto::NodeRecord peek;
    if (peek.ParseFromString(gossip.records(static_cast<int>(i)).record()) &&
        peek.node_id() == sender.Bytes()) {
      refusal = r->status();
    }
  }
  // A member we hold, while its invite still admits it (it may expire).
  std::optional<proto::SignedInvite> held;
  {
    absl::MutexLock lock(&mu_);
    auto it = members_.find(sender);
    if (it != members_.end() && sender != self_) held = it->second.record.invite();
  }
  if (held.has_value()) {
    absl::Status s = CheckAdmission(policy, sender, *held, clock_->Now());
    if (s.ok()) return s;
    refusal = s;
  }
  return refuse(refusal);
}

}  // namespace skipswarm::membership
