// The group core: GrpcGroupComm's public calls, server start/stop, the
// channel cache and push threads (grpc_group_impl.h lists the other files).
#include "node/train/grpc_group.h"

#include <glog/logging.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/resource_quota.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/real_clock.h"
#include "node/train/grpc_group_impl.h"
#include "proto/stage.grpc.pb.h"
#include "proto/version.h"

namespace skipswarm::node {

GrpcGroupComm::Impl::Impl(const GrpcGroupOptions& options, SwarmView* view, common::Clock* clock)
    : options_(options), view_(view), clock_(clock), silent_(options.silent) {
  absl::MutexLock lock(&pushers_mu_);
  for (int i = 0; i < kPushThreads; ++i) pushers_.push_back(std::make_unique<ThreadTaskRunner>());
}

absl::Status GrpcGroupComm::Impl::Start() {
  if (options_.serve_on != nullptr) {  // the daemon's one server (node_server.h)
    options_.serve_on->RegisterService(this);
    return absl::OkStatus();
  }
  grpc::ServerBuilder builder;
  // Exclusive ports: gRPC sets SO_REUSEPORT by default, which let a second
  // daemon on the same port start a second swarm silently.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(options_.listen_address, creds().ForServer(), &port_);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  if (options_.resource_quota != nullptr) builder.SetResourceQuota(*options_.resource_quota);
  builder.RegisterService(this);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve StageService on ", options_.listen_address,
                     " (port in use, or not an address of this host?); see --group_listen"));
  }
  return absl::OkStatus();
}

void GrpcGroupComm::Impl::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (server_) server_->Shutdown(common::SystemDeadlineAfter(absl::ZeroDuration()));
  std::vector<std::unique_ptr<ThreadTaskRunner>> pushers;
  {
    absl::WriterMutexLock lock(&pushers_mu_);
    pushers.swap(pushers_);  // later posts see none and are dropped
  }
  pushers.clear();  // joins the push threads (their tasks may still post)
}

grpc::Status GrpcGroupComm::Impl::Health(grpc::ServerContext*, const proto::HealthRequest*,
                                         proto::HealthResponse* response) {
  response->set_protocol_version(proto::kProtocolVersion);
  response->set_node_id(options_.self.Bytes());
  response->set_version(proto::kSoftwareVersion);
  return grpc::Status::OK;
}

// One channel (one HTTP/2 connection) per peer address and node (a TLS
// channel talks only to its node), reused by every push and state fetch;
// the channels live as long as this object.
std::shared_ptr<grpc::Channel> GrpcGroupComm::Impl::ChannelFor(const std::string& address,
                                                               const common::NodeId& to) {
  absl::MutexLock lock(&channels_mu_);
  std::shared_ptr<grpc::Channel>& c = channels_[absl::StrCat(address, "/", to.Hex())];
  if (c == nullptr) {
    // A restarted peer at the same address is found again within a second.
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    args.SetMaxReceiveMessageSize(kMaxMessageBytes);
    creds().ConfigureChannel(args);
    c = grpc::CreateCustomChannel(address, creds().ForChannel(to), args);
  }
  return c;
}

// Runs `task` on the push thread of `peer` (one per peer, so its pushes
// stay in order); dropped once Shutdown has begun.
void GrpcGroupComm::Impl::PostFor(const common::NodeId& peer, Task task) {
  absl::ReaderMutexLock lock(&pushers_mu_);
  if (pushers_.empty()) return;
  pushers_[std::hash<std::string>()(peer.Bytes()) % pushers_.size()]->Post(std::move(task));
}

std::string GrpcGroupComm::Impl::AddressOf(const common::NodeId& to) const {
  for (const PeerInfo& p : view_->Members()) {
    if (p.id == to) return p.group_address;
  }
  return "";
}

// The stage's replicas the view calls alive, and this node.
std::vector<common::NodeId> GrpcGroupComm::Impl::LiveMembers(int stage) const {
  std::vector<common::NodeId> live = view_->Replicas(stage);
  if (std::find(live.begin(), live.end(), options_.self) == live.end()) {
    live.push_back(options_.self);
  }
  std::sort(live.begin(), live.end());
  return live;
}

// Note [Shard layout] (sharded_reduce.h): the cut of a round of `members`
// from the figures the stage's last finished round handed back.
ShardLayout GrpcGroupComm::Impl::LayoutFor(int stage,
                                           const std::vector<common::NodeId>& members) const {
  auto it = figures_.find(stage);
  if (it == figures_.end()) return ShardLayout();
  std::vector<uint64_t> figures;
  for (const common::NodeId& m : members) {
    auto f = it->second.find(m);
    if (f == it->second.end()) return ShardLayout();  // unknown: equal shards
    figures.push_back(f->second);
  }
  return ShardLayout::FromBandwidths(figures);
}

// This member's figure for a new round.
uint64_t GrpcGroupComm::Impl::OwnUplink() {
  return options_.uplink_bytes_per_second ? options_.uplink_bytes_per_second() : uplink_.Take();
}

// Note [Leaving with pushes owed]
// A node that leaves the swarm may still owe its replica peers pushes of
// rounds it is done with: above all the reduced shards of an outer sync
// that closed a late peer out (Note [Late members] in sharded_reduce.h),
// which on a capped uplink cross for a while after the round ended here.
// A peer that sees the leave before they arrive redoes the round without
// this node and ends on other parameters: the stage's replicas split at
// the end of a run. So a node waits for those pushes before it leaves
// (FlushPushes), and only for them: not for pushes to members its view no
// longer calls alive (re-read at every re-check), nor for those of rounds
// it did not finish (a stop abandoned them; its peers redo them without
// it whatever arrives), nor for barrier messages, probes and state
// fetches on the same push threads. A push is owed from its Push until it
// went, failed for good or was refused; a push waiting to be retried
// (Note [Retried pushes]) is still owed. The wait is bounded by what is
// owed: kFlushSlack plus twice the owed bytes at this node's uplink (its
// cap, else its measured figure; unknown: the caller's bound), never more
// than the caller's bound, on the group's clock. A node keeps its role
// while it waits (micro-batches routed to it then are dropped), so a hung
// peer must not hold the leave for a whole push deadline.
uint64_t GrpcGroupComm::Impl::Owe(const common::NodeId& to, uint64_t iteration, int stage,
                                  uint64_t bytes) {
  absl::MutexLock lock(&owed_mu_);
  const uint64_t id = next_owed_++;
  owed_[id] = OwedPush{to, iteration, stage, bytes};
  ++owed_version_;
  return id;
}

void GrpcGroupComm::Impl::Settle(uint64_t owed) {
  if (owed == 0) return;
  absl::MutexLock lock(&owed_mu_);
  owed_.erase(owed);
  ++owed_version_;
}

bool GrpcGroupComm::Impl::FlushOwed(absl::Duration at_most) {
  const absl::Duration start = clock_->SteadyNow();
  std::optional<absl::Duration> bound;
  uint64_t first_bytes = 0;
  const std::weak_ptr<Impl> weak = weak_from_this();
  for (;;) {
    std::vector<OwedPush> owed;
    uint64_t version = 0;
    {
      absl::MutexLock lock(&owed_mu_);
      version = owed_version_;
      for (const auto& [id, push] : owed_) owed.push_back(push);
    }
    uint64_t bytes = 0;
    bool any = false;
    for (const OwedPush& push : owed) {
      if (!view_->IsAlive(push.to) || !RoundOver(push.iteration, push.stage)) continue;
      any = true;
      bytes += push.bytes;
    }
    if (!any) {
      if (bound.has_value()) {
        LOG(INFO) << "pushes owed to replica peers (" << first_bytes << " bytes) went in "
                  << clock_->SteadyNow() - start;
      }
      return true;
    }
    if (!bound.has_value()) {
      first_bytes = bytes;
      const double rate = options_.max_upload_bytes_per_second > 0
                              ? options_.max_upload_bytes_per_second
                              : static_cast<double>(OwnUplink());
      bound = rate > 0 ? std::min(at_most, kFlushSlack + absl::Seconds(2.0 * bytes / rate))
                       : at_most;
    }
    const absl::Duration left = start + *bound - clock_->SteadyNow();
    if (left <= absl::ZeroDuration()) {
      LOG(WARNING) << "leaving with " << bytes << " bytes of pushes still owed to replica "
                   << "peers after " << *bound;
      return false;
    }
    // Woken when a push settles, or at the next re-check of the view.
    clock_->RunAfter(std::min(left, std::max(options_.recheck, absl::Milliseconds(1))), [weak] {
      if (auto self = weak.lock()) {
        absl::MutexLock lock(&self->owed_mu_);
        ++self->owed_version_;
      }
    });
    absl::MutexLock lock(&owed_mu_);
    auto moved = [this, version]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(owed_mu_) {
      return owed_version_ != version;
    };
    owed_mu_.Await(absl::Condition(&moved));
  }
}

absl::StatusOr<std::unique_ptr<GrpcGroupComm>> GrpcGroupComm::Create(
    const GrpcGroupOptions& options, SwarmView* view, common::Clock* clock) {
  if (options.credentials == nullptr) {
    return absl::InvalidArgumentError(
        "GrpcGroupOptions.credentials is not set (TLS from the node identity, or "
        "PeerCredentials::Insecure() behind --insecure)");
  }
  if (!options.credentials->insecure() && options.credentials->id() != options.self) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GrpcGroupOptions.self ", options.self.ShortString(),
        " is not the node id of the TLS identity (", options.credentials->id().ShortString(), ")"));
  }
  auto impl = std::make_shared<Impl>(options, view, clock);
  absl::Status started = impl->Start();
  if (!started.ok()) return started;
  return std::unique_ptr<GrpcGroupComm>(new GrpcGroupComm(std::move(impl)));
}

GrpcGroupComm::GrpcGroupComm(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

GrpcGroupComm::~GrpcGroupComm() { impl_->Shutdown(); }

bool GrpcGroupComm::FlushPushes(absl::Duration at_most) { return impl_->FlushOwed(at_most); }

int GrpcGroupComm::port() const { return impl_->port_; }

void GrpcGroupComm::Barrier(uint64_t iteration, const common::NodeId& self, bool data_node,
                            BarrierDone done) {
  {
    absl::MutexLock lock(&impl_->mu_);
    if (data_node) impl_->arrived_[iteration].insert(self);
    impl_->ReachedLocked(iteration);
    impl_->barrier_waiters_[iteration].push_back(std::move(done));
    impl_->barrier_since_.try_emplace(iteration, impl_->clock_->SteadyNow());
  }
  if (data_node) {
    for (const PeerInfo& p : impl_->view_->Members()) {
      if (p.id != self && impl_->view_->IsAlive(p.id)) {
        impl_->Push(p.id, /*phase=*/0, iteration, kBarrierStage, nullptr);
      }
    }
  }
  impl_->Sweep();
}

void GrpcGroupComm::StateIterationBound(uint64_t iteration, const common::NodeId& self,
                                        absl::Duration bound) {
  absl::MutexLock lock(&impl_->mu_);
  impl_->own_stated_[iteration] =
      std::clamp(bound, absl::ZeroDuration(), impl_->options_.max_stated_bound);
  while (impl_->own_stated_.size() > 8) impl_->own_stated_.erase(impl_->own_stated_.begin());
}

absl::Status GrpcGroupComm::Impl::TakeQuota(common::PeerQuota& quota,
                                            const common::NodeId& from, uint64_t bytes,
                                            common::PeerQuota::StreamSlot* slot) {
  // Note [Refusal hold]: refusals are held here, before the handler answers.
  absl::StatusOr<common::PeerQuota::StreamSlot> taken = quota.OpenStream(from);
  if (!taken.ok()) {
    quota.HoldRefusal(taken.status());
    return taken.status();
  }
  absl::Status admitted = quota.Admit(from, bytes, /*messages=*/0);  // the open was one
  if (admitted.ok()) {
    *slot = std::move(*taken);
  } else {
    quota.HoldRefusal(admitted);
  }
  return admitted;
}

uint64_t GrpcGroupComm::pushes_refused() const {
  absl::MutexLock lock(&impl_->mu_);
  return impl_->stats_pushes_refused_;
}

std::map<common::NodeId, std::string> GrpcGroupComm::banned() const {
  absl::MutexLock lock(&impl_->bans_mu_);
  return impl_->banned_;
}

std::map<common::NodeId, AdoptedBan> GrpcGroupComm::adopted_bans() const {
  absl::MutexLock lock(&impl_->bans_mu_);
  return impl_->gossiped_.adopted();
}

uint64_t GrpcGroupComm::pushed_bytes() const { return impl_->pushed_bytes_.load(); }

uint64_t GrpcGroupComm::messages_received() const {
  absl::MutexLock lock(&impl_->mu_);
  return impl_->stats_messages_received_;
}

uint64_t GrpcGroupComm::early_bytes() const {
  absl::MutexLock lock(&impl_->mu_);
  return impl_->early_bytes_;
}

void GrpcGroupComm::SetStateProvider(const common::NodeId&, StateProvider provider) {
  absl::MutexLock lock(&impl_->mu_);
  impl_->provider_ = std::move(provider);
}

void GrpcGroupComm::FetchState(uint64_t iteration, int stage, const common::NodeId& from,
                               StateDone done) {
  impl_->TryFetch(iteration, stage, from, std::make_shared<StateDone>(std::move(done)), 0);
}

// The same member list AllReduce would start its round with; a part a
// peer already pushed for the round means the peer counts this member in,
// so the round runs as usual.
bool GrpcGroupComm::SoleReplica(uint64_t iteration, int stage, const common::NodeId& self) {
  if (self != impl_->options_.self) return false;
  const std::vector<common::NodeId> live = impl_->LiveMembers(stage);
  if (live.size() != 1 || live[0] != self) return false;
  absl::MutexLock lock(&impl_->mu_);
  const std::pair<uint64_t, int> key{iteration, stage};
  return impl_->early_.count(key) == 0 && impl_->reduces_.count(key) == 0;
}

bool GrpcGroupComm::OnProbation(const common::NodeId& id) {
  for (const PeerInfo& m : impl_->view_->Members()) {
    if (m.id == id) return m.on_probation;
  }
  return false;
}

bool GrpcGroupComm::HasLiveDataNode(uint64_t iteration) {
  if (!impl_->view_->Replicas(0).empty()) return true;
  // Note [Data node entered later] (data_node_wait.h): nobody will be a data
  // node of `iteration`; the barrier completes at once and the iteration
  // passes empty, as it would have had we started it before our data node left.
  return LaterDataNodeEntry(iteration).has_value();
}

std::optional<uint64_t> GrpcGroupComm::LaterDataNodeEntry(uint64_t iteration) {
  if (!impl_->view_->Replicas(0).empty()) return std::nullopt;
  const auto& later = impl_->options_.data_node_enters_after;
  if (later == nullptr) return std::nullopt;
  return later(iteration);
}

// Armed first, then the view asked: a data node the view gains after the
// ask is seen by the next Sweep, which finds the wake armed.
uint64_t GrpcGroupComm::WakeOnDataNode(absl::AnyInvocable<void()> wake) {
  const uint64_t id = impl_->data_node_wakes_.Add(std::move(wake));
  if (!impl_->view_->Replicas(0).empty()) impl_->data_node_wakes_.WakeAll(impl_->clock_);
  return id;
}

bool GrpcGroupComm::CancelDataNodeWake(uint64_t id) {
  return impl_->data_node_wakes_.Cancel(id);
}

void GrpcGroupComm::AllReduce(uint64_t iteration, int stage, GradientContribution contribution,
                              ReduceDone done) {
  std::vector<OutgoingReduce> out;
  const std::vector<common::NodeId> live = impl_->LiveMembers(stage);
  const uint64_t uplink = impl_->OwnUplink();  // outside mu_: a caller's function
  const std::vector<PeerInfo> members = impl_->view_->Members();
  std::vector<BanReport> reports;  // Note [Gossiped bans]: live members' published bans
  for (const PeerInfo& m : members) {
    if (impl_->view_->IsAlive(m.id)) reports.push_back({m.id, m.stages, m.bans, !m.on_probation});
  }
  const EvidencedBans evidenced =
      impl_->options_.evidence_bans ? impl_->options_.evidence_bans() : EvidencedBans{};
  {
    absl::MutexLock lock(&impl_->mu_);
    const std::pair<uint64_t, int> key{iteration, stage};
    impl_->ReachedLocked(iteration);
    impl_->stage_elements_[stage] = contribution.flat.size();
    auto& pending = impl_->reduces_[key];
    if (pending.reduce == nullptr) {
      pending.close_after = contribution.close_after;
      RobustOptions robust = impl_->options_.robust;
      {
        absl::MutexLock bans(&impl_->bans_mu_);  // Note [Group bans]
        for (const auto& [id, reason] : impl_->banned_) robust.banned.insert(id);
        // Note [Gossiped bans]: peers' bans this node adopts, the same way.
        impl_->gossiped_.Update(impl_->options_.self, robust.banned, reports, evidenced);
        for (const auto& [id, ban] : impl_->gossiped_.adopted()) robust.banned.insert(id);
      }
      for (const PeerInfo& m : members) {  // Note [Robust averaging across subnetworks]
        if (m.subnetwork) robust.subnetworks[m.id] = m.stages;
        if (m.on_probation) robust.newcomers.insert(m.id);  // Note [Newcomer weight]
      }
      robust.across_classes = stage != 0;  // not the data stage (the tied embedding)
      pending.reduce = std::make_unique<ShardedReduce>(
          impl_->options_.self, iteration, stage, std::move(contribution), uplink,
          std::move(robust), impl_->options_.codec, &impl_->gather_residual_[stage]);
      ShardLayout layout = impl_->LayoutFor(stage, live);
      VLOG(1) << "iteration " << iteration << " stage " << stage << ": own uplink " << uplink
              << " B/s, shard weights "
              << (layout.equal() ? std::string("equal") : absl::StrJoin(layout.weights, "/"));
      out = pending.reduce->Start(live, std::move(layout));
      auto early = impl_->early_.find(key);
      if (early != impl_->early_.end()) {
        for (ReduceMessage& m : early->second) {
          auto more = pending.reduce->Receive(std::move(m));
          if (!more.ok()) {
            LOG(WARNING) << "refused a gradient shard: " << more.status();
            continue;
          }
          out.insert(out.end(), std::make_move_iterator(more->begin()),
                     std::make_move_iterator(more->end()));
        }
        impl_->early_bytes_ = 0;  // (moved out above; recounted below)
        impl_->early_.erase(early);
        for (const auto& [k, msgs] : impl_->early_) {
          for (const ReduceMessage& m : msgs) impl_->early_bytes_ += m.data->size() * sizeof(float);
        }
      }
    }
    if (pending.waiters.empty() && !pending.delivered) {
      pending.since = impl_->clock_->SteadyNow();
      pending.round_since = pending.since;
    }
    pending.waiters.push_back(std::move(done));
    pending.delivered = false;
  }
  impl_->Send(std::move(out));
  impl_->Sweep();
}

}  // namespace skipswarm::node
