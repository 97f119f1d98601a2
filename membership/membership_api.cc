// Membership's public methods and its GossipHandler side.
#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "membership/membership.h"
#include "membership/membership_impl.h"
#include "proto/version.h"

namespace skipswarm::membership {

absl::StatusOr<std::unique_ptr<Membership>> Membership::Create(
    MembershipOptions options, const identity::Identity* identity,
    GossipTransport* transport, common::Clock* clock, common::Random rng) {
  if (identity == nullptr || transport == nullptr || clock == nullptr) {
    return absl::InvalidArgumentError("identity, transport and clock required");
  }
  if (options.probe_timeout >= options.probe_interval ||
      options.probe_interval <= absl::ZeroDuration() ||
      options.gossip_interval <= absl::ZeroDuration() ||
      options.push_pull_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "need 0 < probe_timeout < probe_interval and positive intervals");
  }
  if (options.addresses.empty() ||
      static_cast<int>(options.addresses.size()) > kMaxAddresses) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a member advertises 1..", kMaxAddresses, " addresses"));
  }
  if (options.memory_slots == 0) {
    return absl::InvalidArgumentError("memory_slots must be >= 1");
  }
  std::optional<RevocationSet> revoked;
  if (!options.revocations.list().empty()) {
    absl::StatusOr<RevocationSet> set =
        VerifyRevocations(options.revocations, options.policy.admission);
    if (!set.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the revocation list to start from: ", set.status().message()));
    }
    revoked = *std::move(set);
  }
  auto impl = std::make_shared<Impl>(std::move(options), identity, transport,
                                     clock, std::move(rng));
  {
    absl::MutexLock lock(&impl->mu_);
    proto::NodeRecord& r = impl->members_[impl->self_].record;
    r.set_swarm_id(impl->options_.policy.swarm_id);
    r.set_model_id(impl->options_.policy.model_id);
    r.set_averaging_id(impl->options_.policy.averaging_id);
    r.set_sign_frames(impl->options_.policy.sign_frames);
    if (!impl->options_.invite.invite().empty()) *r.mutable_invite() = impl->options_.invite;
    r.set_join_work(impl->options_.join_work);
    for (const std::string& a : impl->options_.addresses) r.add_addresses(a);
    for (uint32_t s : impl->options_.stages) r.add_stages(s);
    r.set_memory_slots(impl->options_.memory_slots);
    r.set_seconds_per_layer_per_sample(
        impl->options_.seconds_per_layer_per_sample);
    // Start above any incarnation of an earlier life of this key: the wall
    // clock in milliseconds only grows across restarts (barring big steps).
    const int64_t ms = absl::ToUnixMillis(clock->Now());
    absl::Status s = impl->SignSelfLocked(
        static_cast<uint64_t>(std::max<int64_t>(ms, 1)),
        proto::MEMBER_STATE_ALIVE);
    if (!s.ok()) return s;
    Impl::Changes none;  // (the table holds only us)
    if (revoked) impl->ApplyRevocationsLocked(impl->options_.revocations, *std::move(revoked), &none);
  }
  return std::unique_ptr<Membership>(new Membership(std::move(impl)));
}

Membership::Membership(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

Membership::~Membership() { impl_->Shutdown(); }

void Membership::AddListener(Listener listener) {
  impl_->listeners_.push_back(std::move(listener));
}

void Membership::Start() {
  {
    absl::MutexLock lock(&impl_->mu_);
    if (impl_->started_ || impl_->stopped_) return;
    impl_->started_ = true;
  }
  impl_->ScheduleProbe();
  impl_->ScheduleGossip();
  impl_->SchedulePushPull();
  impl_->ScheduleRefresh();
  impl_->ScheduleReconnect();
  impl_->ScheduleHeartbeat();
}

void Membership::Join(std::vector<std::string> bootstrap,
                      absl::AnyInvocable<void(absl::Status)> done) {
  std::vector<std::string> addresses;
  {
    absl::MutexLock lock(&impl_->mu_);
    for (std::string& a : bootstrap) {
      if (std::find(impl_->options_.addresses.begin(),
                    impl_->options_.addresses.end(),
                    a) == impl_->options_.addresses.end()) {
        addresses.push_back(a);
      }
    }
    impl_->bootstrap_ = addresses;
  }
  if (addresses.empty()) {
    // Only ourselves: we are the first member of a new swarm.
    done(absl::OkStatus());
    return;
  }
  auto join = std::make_shared<JoinState>();
  join->addresses = std::move(addresses);
  {
    absl::MutexLock lock(&join->mu);
    join->done = std::move(done);
  }
  impl_->JoinRound(std::move(join));
}

void Membership::Leave(absl::AnyInvocable<void()> done) {
  Leave([](proto::NodeRecord*) {}, std::move(done));
}

void Membership::Leave(absl::FunctionRef<void(proto::NodeRecord*)> edit,
                       absl::AnyInvocable<void()> done) {
  std::vector<std::pair<PeerRef, proto::PingRequest>> sends;
  absl::Duration left_at;
  std::vector<common::NodeId> wait_for;  // outbound-only: they hear it from us
  {
    absl::MutexLock lock(&impl_->mu_);
    Impl::Member& me = impl_->members_[impl_->self_];
    const proto::NodeRecord saved = me.record;
    edit(&me.record);
    // As in UpdateLocalRecord: the owner may not change what it is about.
    me.record.set_node_id(saved.node_id());
    me.record.set_public_key(saved.public_key());
    me.record.set_swarm_id(saved.swarm_id());
    me.record.set_incarnation(saved.incarnation());
    me.record.set_state(saved.state());
    impl_->SignSelfLocked(0, proto::MEMBER_STATE_LEFT).IgnoreError();
    left_at = impl_->clock_->SteadyNow();
    if (!me.record.outbound_only()) {
      for (const auto& [id, m] : impl_->members_) {
        if (id != impl_->self_ && m.live() && m.record.outbound_only()) {
          wait_for.push_back(id);
        }
      }
    }
    std::vector<common::NodeId> peers = impl_->DialableOthersLocked();
    impl_->rng_.Shuffle(peers);
    const size_t n = std::min(peers.size(),
                              static_cast<size_t>(2 * impl_->options_.gossip_fanout));
    for (size_t i = 0; i < n; ++i) {
      proto::PingRequest req = impl_->NewPingLocked(++impl_->seq_);
      *req.mutable_gossip()->add_records() =
          impl_->members_[impl_->self_].signed_record;
      sends.push_back({impl_->RefLocked(impl_->members_[peers[i]]), req});
    }
  }
  LOG(INFO) << "membership " << impl_->self_ << ": leaving, telling "
            << sends.size() << " members";
  struct Pending {
    absl::Mutex mu;
    int left ABSL_GUARDED_BY(mu) = 0;
    absl::AnyInvocable<void()> done ABSL_GUARDED_BY(mu);
  };
  auto pending = std::make_shared<Pending>();
  {
    absl::MutexLock lock(&pending->mu);
    pending->left = static_cast<int>(sends.size());
    pending->done = std::move(done);
  }
  auto finish = [impl = impl_.get(), pending, left_at, wait_for] {
    absl::AnyInvocable<void()> cb;
    {
      absl::MutexLock lock(&pending->mu);
      if (--pending->left > 0) return;
      cb = std::move(pending->done);
    }
    impl->Stop();
    impl->AwaitHeardSince(wait_for, left_at, left_at + impl->options_.leave_linger,
                          std::move(cb));
  };
  if (sends.empty()) {
    absl::MutexLock lock(&pending->mu);
    pending->left = 1;
  }
  if (sends.empty()) {
    finish();
    return;
  }
  for (auto& [to, req] : sends) {
    impl_->transport_->Ping(to, req, impl_->options_.probe_interval,
                            impl_->Guard([finish](absl::StatusOr<proto::Ack>) {
                              finish();
                            }));
  }
}

void Membership::Impl::AwaitHeardSince(std::vector<common::NodeId> ids, absl::Duration since,
                                       absl::Duration deadline,
                                       absl::AnyInvocable<void()> done) {
  bool waiting = false;
  {
    absl::MutexLock lock(&mu_);
    for (const common::NodeId& id : ids) {
      auto it = members_.find(id);
      // Gone, or no longer live (it left too, or died): nothing to wait for.
      if (it == members_.end() || !it->second.live()) continue;
      waiting |= it->second.last_heard <= since;
    }
  }
  if (!waiting || clock_->SteadyNow() >= deadline) {
    if (done) done();
    return;
  }
  // Polled: its requests come once per probe round; a few checks a round
  // cost nothing and keep HeardFromLocked free of leave bookkeeping.
  clock_->RunAfter(options_.probe_interval / 4,
                   Guard([this, ids = std::move(ids), since, deadline,
                          done = std::move(done)]() mutable {
                     AwaitHeardSince(std::move(ids), since, deadline, std::move(done));
                   }));
}

void Membership::Stop() { impl_->Stop(); }

void Membership::Shutdown() { impl_->Shutdown(); }

void Membership::Announce(absl::AnyInvocable<void(int, int)> done) {
  std::vector<PeerRef> peers;
  {
    absl::MutexLock lock(&impl_->mu_);
    for (const common::NodeId& id : impl_->DialableOthersLocked()) {
      peers.push_back(impl_->RefLocked(impl_->members_[id]));
    }
  }
  if (peers.empty()) {
    done(0, 0);
    return;
  }
  struct Pending {
    absl::Mutex mu;
    int left ABSL_GUARDED_BY(mu) = 0;
    int reached ABSL_GUARDED_BY(mu) = 0;
    absl::AnyInvocable<void(int, int)> done ABSL_GUARDED_BY(mu);
  };
  auto pending = std::make_shared<Pending>();
  const int asked = static_cast<int>(peers.size());
  {
    absl::MutexLock lock(&pending->mu);
    pending->left = asked;
    pending->done = std::move(done);
  }
  for (const PeerRef& to : peers) {
    impl_->PushPull(to, [pending, asked](absl::Status s) {
      absl::AnyInvocable<void(int, int)> cb;
      int reached;
      {
        absl::MutexLock lock(&pending->mu);
        if (s.ok()) ++pending->reached;
        if (--pending->left > 0) return;
        cb = std::move(pending->done);
        reached = pending->reached;
      }
      if (cb) cb(reached, asked);
    });
  }
}

absl::Status Membership::UpdateLocalRecord(
    absl::FunctionRef<void(proto::NodeRecord*)> edit) {
  Impl::Changes changes;
  {
    absl::MutexLock lock(&impl_->mu_);
    Impl::Member& me = impl_->members_[impl_->self_];
    proto::NodeRecord saved = me.record;
    edit(&me.record);
    // The owner may not change what the record is about.
    me.record.set_node_id(saved.node_id());
    me.record.set_public_key(saved.public_key());
    me.record.set_swarm_id(saved.swarm_id());
    me.record.set_incarnation(saved.incarnation());
    me.record.set_state(saved.state());
    absl::Status s = impl_->SignSelfLocked(0, me.state);
    if (!s.ok()) {
      me.record = saved;
      return s;
    }
    changes.push_back({impl_->self_, me.state, me.state, true});
  }
  impl_->Publish(changes);
  return absl::OkStatus();
}

absl::Status Membership::SetComputeSpeed(double seconds_per_layer_per_sample) {
  if (!(seconds_per_layer_per_sample >= 0) ||
      !std::isfinite(seconds_per_layer_per_sample)) {
    return absl::InvalidArgumentError("compute speed must be finite and >= 0");
  }
  return UpdateLocalRecord([&](proto::NodeRecord* r) {
    r->set_seconds_per_layer_per_sample(seconds_per_layer_per_sample);
  });
}

absl::StatusOr<bool> Membership::LowerMemorySlots(uint32_t slots) {
  if (slots == 0) return absl::InvalidArgumentError("memory slots must be >= 1");
  {
    absl::MutexLock lock(&impl_->mu_);
    if (slots >= impl_->members_[impl_->self_].record.memory_slots()) return false;
  }
  // Only this node edits its record, from one thread at a time in the
  // daemon (the trainer's iteration callback), so the check above holds.
  absl::Status s =
      UpdateLocalRecord([&](proto::NodeRecord* r) { r->set_memory_slots(slots); });
  if (!s.ok()) return s;
  return true;
}

void Membership::ReportTransfer(const common::NodeId& peer, uint64_t bytes,
                                absl::Duration elapsed) {
  absl::MutexLock lock(&impl_->mu_);
  impl_->link_stats_.ObserveTransfer(peer, bytes, elapsed, impl_->clock_->Now());
}

void Membership::ReportRtt(const common::NodeId& peer, absl::Duration rtt) {
  absl::MutexLock lock(&impl_->mu_);
  impl_->link_stats_.ObserveRtt(peer, rtt, impl_->clock_->Now());
}

void Membership::CheckReachability(absl::AnyInvocable<void(absl::Status)> done) {
  PeerRef helper;
  proto::PingRequest req;
  std::string address;
  {
    absl::MutexLock lock(&impl_->mu_);
    std::vector<common::NodeId> peers = impl_->DialableOthersLocked();
    if (!peers.empty()) {
      helper = impl_->RefLocked(impl_->members_[peers[impl_->rng_.UniformInt(
          0, static_cast<int64_t>(peers.size()) - 1)]]);
    }
    req = impl_->NewPingLocked(++impl_->seq_);
    req.set_target(impl_->self_.Bytes());
    *req.mutable_gossip()->add_records() =
        impl_->members_[impl_->self_].signed_record;
    const proto::NodeRecord& me = impl_->members_[impl_->self_].record;
    address = me.addresses_size() > 0 ? me.addresses(0) : "";
  }
  if (helper.address.empty()) {
    done(absl::UnavailableError("no live member to check reachability with"));
    return;
  }
  impl_->transport_->PingReq(
      helper, req, impl_->options_.probe_interval * 3,
      [address, helper, done = std::move(done)](
          absl::StatusOr<proto::Ack> ack) mutable {
        if (!ack.ok()) {
          done(absl::UnavailableError(absl::StrCat(
              "reachability check via ", helper.address,
              " failed: ", ack.status().message())));
        } else if (!ack->target_alive()) {
          done(absl::FailedPreconditionError(absl::StrCat(
              "peers cannot reach this node at ", address,
              " (", helper.address, " tried); behind NAT or a firewall? "
              "forward the port or advertise a reachable address")));
        } else {
          done(absl::OkStatus());
        }
      });
}

const common::NodeId& Membership::id() const { return impl_->self_; }

View Membership::GetView() const {
  absl::MutexLock lock(&impl_->mu_);
  return impl_->ViewLocked();
}

MembershipStats Membership::stats() const {
  MembershipStats stats;
  {
    absl::MutexLock lock(&impl_->mu_);
    stats = impl_->stats_;
  }
  stats.messages_refused += impl_->quota_->total_refusals();
  return stats;
}

const common::PeerQuota& Membership::quota() const { return *impl_->quota_; }

// ---------------------------------------------------------------- handlers

absl::StatusOr<VerifiedRecords> Membership::Impl::VerifyIncoming(
    const absl::Status& status, const common::NodeId& sender, const proto::Gossip& gossip,
    int max_records, const SenderRecordCheck& sender_record) {
  SS_RETURN_IF_ERROR(status);
  SS_ASSIGN_OR_RETURN(VerifiedRecords verified,
                      PrepareGossip(gossip, max_records, &sender_record));
  SS_RETURN_IF_ERROR(CheckSenderAdmitted(sender, gossip, verified));
  return verified;
}

absl::StatusOr<proto::Ack> Membership::Impl::ProbeRefusal(const common::NodeId& sender,
                                                          uint64_t seq,
                                                          const absl::Status& refused) {
  // Note [Revocation notice] (membership_revocation.cc).
  if (!absl::IsPermissionDenied(refused)) return refused;
  std::optional<proto::Ack> notice = RevocationNotice(sender, seq);
  if (notice.has_value()) return *std::move(notice);
  return refused;
}

void Membership::HandlePing(const PeerInfo& from, const proto::PingRequest& req,
                            AckCallback reply) {
  common::NodeId sender;
  absl::Status status = impl_->CheckRequest(from, req.protocol_version(),
                                            req.swarm_id(), req.from(), &sender);
  SenderRecordCheck sender_record;
  if (status.ok()) {
    status = impl_->RateLimit(sender, req.ByteSizeLong(), req.gossip(), &sender_record);
  }
  absl::StatusOr<VerifiedRecords> verified = impl_->VerifyIncoming(
      status, sender, req.gossip(), impl_->options_.max_records_per_message, sender_record);
  if (!verified.ok()) {
    impl_->AnswerRefusal(verified.status(), std::move(reply),
                         impl_->ProbeRefusal(sender, req.seq(), verified.status()));
    return;
  }
  Impl::Changes changes;
  proto::Ack ack;
  {
    absl::MutexLock lock(&impl_->mu_);
    impl_->ApplyGossipLocked(req.gossip(), sender, &changes, &*verified);
    impl_->HeardFromLocked(sender);
    ack.set_protocol_version(proto::kProtocolVersion);
    ack.set_from(impl_->self_.Bytes());
    ack.set_seq(req.seq());
    impl_->FillGossipLocked(ack.mutable_gossip());
    impl_->AddOpinionAboutLocked(sender, ack.mutable_gossip());
    impl_->AddRecordsSinceLastReplyLocked(sender, ack.mutable_gossip());
    if (impl_->members_[impl_->self_].state == proto::MEMBER_STATE_LEFT) {
      *ack.mutable_gossip()->add_records() =
          impl_->members_[impl_->self_].signed_record;
    }
  }
  impl_->Publish(changes);
  reply(std::move(ack));
}

void Membership::HandlePingReq(const PeerInfo& from,
                               const proto::PingRequest& req,
                               AckCallback reply) {
  common::NodeId sender;
  absl::Status status = impl_->CheckRequest(from, req.protocol_version(),
                                            req.swarm_id(), req.from(), &sender);
  SenderRecordCheck sender_record;
  if (status.ok()) {
    status = impl_->RateLimit(sender, req.ByteSizeLong(), req.gossip(), &sender_record);
  }
  absl::StatusOr<VerifiedRecords> verified = impl_->VerifyIncoming(
      status, sender, req.gossip(), impl_->options_.max_records_per_message, sender_record);
  if (!verified.ok()) {
    impl_->AnswerRefusal(verified.status(), std::move(reply),
                         impl_->ProbeRefusal(sender, req.seq(), verified.status()));
    return;
  }
  absl::StatusOr<common::NodeId> target = common::NodeId::FromBytes(req.target());
  Impl::Changes changes;
  proto::Ack ack;
  PeerRef to;
  proto::PingRequest ping;
  {
    absl::MutexLock lock(&impl_->mu_);
    impl_->ApplyGossipLocked(req.gossip(), sender, &changes, &*verified);
    impl_->HeardFromLocked(sender);
    ack.set_protocol_version(proto::kProtocolVersion);
    ack.set_from(impl_->self_.Bytes());
    ack.set_seq(req.seq());
    impl_->AddOpinionAboutLocked(sender, ack.mutable_gossip());
    impl_->AddRecordsSinceLastReplyLocked(sender, ack.mutable_gossip());
    if (impl_->members_[impl_->self_].state == proto::MEMBER_STATE_LEFT) {
      // As in HandlePing: how a member we cannot dial hears of our leave.
      *ack.mutable_gossip()->add_records() = impl_->members_[impl_->self_].signed_record;
    }
    auto it = target.ok() ? impl_->members_.find(*target) : impl_->members_.end();
    if (it != impl_->members_.end()) {
      to = impl_->RefLocked(it->second);
      ping = impl_->NewPingLocked(++impl_->seq_);
      impl_->FillGossipLocked(ping.mutable_gossip());
    }
  }
  impl_->Publish(changes);
  if (to.address.empty()) {
    ack.set_target_alive(false);
    reply(std::move(ack));
    return;
  }
  // Not guarded: the reply must be sent even while we shut down, and it
  // touches nothing of ours.
  impl_->transport_->Ping(
      to, ping, impl_->options_.probe_timeout,
      [ack = std::move(ack), id = to.id,
       reply = std::move(reply)](absl::StatusOr<proto::Ack> result) mutable {
        ack.set_target_alive(result.ok() && result->from() == id.Bytes());
        reply(std::move(ack));
      });
}

void Membership::HandlePushPull(const PeerInfo& from,
                                const proto::PushPullRequest& req,
                                PushPullCallback reply) {
  common::NodeId sender;
  absl::Status status = impl_->CheckRequest(from, req.protocol_version(),
                                            req.swarm_id(), req.from(), &sender);
  if (status.ok() && req.digests_size() > 4 * impl_->options_.max_push_pull_records) {
    status = absl::InvalidArgumentError("too many digests");
  }
  SenderRecordCheck sender_record;
  if (status.ok()) {
    status = impl_->RateLimit(sender, req.ByteSizeLong(), req.gossip(), &sender_record);
  }
  absl::StatusOr<VerifiedRecords> verified = impl_->VerifyIncoming(
      status, sender, req.gossip(), impl_->options_.max_push_pull_records, sender_record);
  if (!verified.ok()) {
    impl_->AnswerRefusal(verified.status(), std::move(reply), verified.status());
    return;
  }
  Impl::Changes changes;
  proto::PushPullResponse resp;
  {
    absl::MutexLock lock(&impl_->mu_);
    impl_->ApplyGossipLocked(req.gossip(), sender, &changes, &*verified);
    impl_->HeardFromLocked(sender);
    absl::flat_hash_map<common::NodeId, std::pair<uint64_t, proto::MemberState>>
        theirs;
    for (const proto::RecordDigest& d : req.digests()) {
      absl::StatusOr<common::NodeId> id = common::NodeId::FromBytes(d.node_id());
      if (!id.ok()) continue;
      theirs[*id] = {d.incarnation(), d.state()};
      // Unsigned: only one about us counts (Note [Incarnation bounds]).
      if (*id == impl_->self_ && (d.state() == proto::MEMBER_STATE_SUSPECT ||
                                  d.state() == proto::MEMBER_STATE_DEAD)) {
        impl_->ApplyOpinionLocked(*id, d.state(), d.incarnation(), sender,
                                  /*first_hand=*/false, &changes);
      }
    }
    resp.set_protocol_version(proto::kProtocolVersion);
    resp.set_from(impl_->self_.Bytes());
    for (const auto& [id, m] : impl_->MembersForPushPullLocked(sender)) {
      // A dead member's record says "alive" (it is the owner's); sending it
      // would make a joiner list the member as live until its own timer
      // runs out. LEFT records carry their state and do travel.
      if (m->state == proto::MEMBER_STATE_DEAD) continue;
      auto it = theirs.find(id);
      if ((it == theirs.end() || it->second.first < m->incarnation()) &&
          resp.gossip().records_size() < impl_->options_.max_push_pull_records) {
        *resp.mutable_gossip()->add_records() = m->signed_record;
      }
    }
    for (proto::RecordDigest& d : impl_->DigestsLocked()) {
      *resp.add_digests() = std::move(d);
    }
    impl_->FillGossipLocked(resp.mutable_gossip());
    impl_->AddRevocationsLocked(resp.mutable_gossip());  // Note [Revocation]
    impl_->AddOpinionsForDigestsLocked(
        req.digests(), impl_->options_.max_updates_per_message,
        resp.mutable_gossip());
  }
  impl_->Publish(changes);
  reply(std::move(resp));
}

}  // namespace skipswarm::membership
