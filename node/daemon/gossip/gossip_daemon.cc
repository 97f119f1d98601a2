#include "node/daemon/gossip/gossip_daemon.h"

#include <glog/logging.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/real_clock.h"
#include "common/status_macros.h"
#include "model/memory_estimate.h"
#include "node/compute/task_runner.h"
#include "node/daemon/gossip/advertise_address.h"
#include "node/daemon/gossip/advertise_auto.h"
#include "node/daemon/gossip/control.grpc.pb.h"
#include "node/daemon/gossip/first_work_probe.h"
#include "node/daemon/gossip/gossip_daemon_parts.h"
#include "node/daemon/gossip/gossip_mode_options.h"
#include "node/daemon/gossip/join_planning.h"
#include "node/daemon/gossip/reachability.h"
#include "node/daemon/gossip/state_transfer.h"
#include "node/daemon/gossip/training_members.h"
#include "node/daemon/reporting/daemon_reporting.h"
#include "node/daemon/reporting/memory_ceiling.h"
#include "node/daemon/reporting/metrics.h"
#include "node/daemon/reporting/speed_reports.h"
#include "node/daemon/stack/planner_factory.h"
#include "node/daemon/stack/stage_checkpoints.h"
#include "node/daemon/stack/training_stack.h"
#include "membership/record.h"
#include "node/train/gossiped_bans.h"
#include "node/train/grpc_group.h"
#include "node/train/node_trainer.h"
#include "node/train/scheduler_repairer.h"
#include "node/transport/grpc_transport.h"
#include "node/transport/wan_table.h"
#include "proto/grpc_status.h"

namespace skipswarm::node {
namespace {

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

// Live members of `view` other than its own node.
size_t LivePeers(const membership::View& view) {
  size_t n = 0;
  for (const membership::MemberInfo* m : view.Live()) n += m->id != view.self;
  return n;
}

// Note [Peer quotas]: who counts as a member (the view's live records).
std::vector<common::NodeId> LiveIds(const membership::View& view) {
  std::vector<common::NodeId> ids;
  for (const membership::MemberInfo* m : view.Live()) ids.push_back(m->id);
  return ids;
}

// The ids the quotas treat as members: the live ones, or (Note [Admission],
// members_only quotas) every admitted id in the table, tombstones included.
std::vector<common::NodeId> QuotaMemberIds(const membership::View& view, bool members_only) {
  if (!members_only) return LiveIds(view);
  std::vector<common::NodeId> ids;
  for (const membership::MemberInfo& m : view.members) ids.push_back(m.id);
  return ids;
}

}  // namespace

void GossipDaemon::Parts::OnMemberChange(const membership::MemberChange& c) {
  if (c.id == self || c.old_state == c.new_state) return;
  // The faces already see it (listener below); the data nodes' next plan
  // uses it.
  LOG(INFO) << base().name << ": member " << c.id.ShortString() << " "
            << proto::MemberState_Name(c.old_state) << " -> "
            << proto::MemberState_Name(c.new_state) << "; next iteration re-plans with it";
  metrics.Add("skipswarm_membership_changes_total", 1);
  const auto state = [](proto::MemberState s) {
    return s == proto::MEMBER_STATE_UNSPECIFIED ? std::string("new")
                                                : proto::MemberState_Name(s).substr(13);
  };
  status->AddEvent("member", absl::StrCat(c.id.ShortString(), " ", state(c.old_state), " -> ",
                                          state(c.new_state)));
}

std::string GossipDaemon::gossip_address() const { return parts_->gossip->endpoints().gossip; }

int GossipDaemon::metrics_port() const {
  return parts_->metrics_server ? parts_->metrics_server->port() : -1;
}

membership::View GossipDaemon::view() const { return parts_->gossip->membership()->GetView(); }

namespace {

class ControlService final : public proto::NodeControl::Service {
 public:
  explicit ControlService(GossipDaemon* daemon) : daemon_(daemon) {}
  grpc::Status Drain(grpc::ServerContext*, const proto::DrainRequest* request,
                     proto::DrainResponse* response) override {
    absl::Status s = daemon_->RequestDrain(request->force());
    if (!s.ok()) return proto::ToGrpcStatus(s);
    response->set_message("draining: finishing the current iteration, then leaving");
    return grpc::Status::OK;
  }
  grpc::Status Pause(grpc::ServerContext*, const proto::PauseRequest* request,
                     proto::PauseResponse* response) override {
    absl::Status s = daemon_->RequestPause(!request->resume(), request->force());
    if (!s.ok()) return proto::ToGrpcStatus(s);
    response->set_message(
        daemon_->paused()
            ? "paused: no new micro-batches (the ones in flight finish); still a member, "
              "still averaging; `skipswarm node resume` to take work again"
            : "resumed: taking micro-batches again from the next plan");
    return grpc::Status::OK;
  }

 private:
  GossipDaemon* const daemon_;
};

}  // namespace

absl::StatusOr<std::string> SendDrain(const std::string& address, bool force) {
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  auto stub = proto::NodeControl::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(common::SystemDeadlineAfter(absl::Seconds(10)));
  proto::DrainRequest request;
  request.set_force(force);
  proto::DrainResponse response;
  absl::Status s = proto::ToAbslStatus(stub->Drain(&context, request, &response));
  if (!s.ok()) return s;
  return response.message();
}

absl::StatusOr<std::string> SendPause(const std::string& address, bool resume, bool force) {
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  auto stub = proto::NodeControl::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(common::SystemDeadlineAfter(absl::Seconds(10)));
  proto::PauseRequest request;
  request.set_resume(resume);
  request.set_force(force);
  proto::PauseResponse response;
  absl::Status s = proto::ToAbslStatus(stub->Pause(&context, request, &response));
  if (!s.ok()) return s;
  return response.message();
}

absl::StatusOr<std::unique_ptr<GossipDaemon>> GossipDaemon::Create(
    const GossipDaemonOptions& options, NodeBackend backend) {
  const NodeDaemonOptions& base = options.base;
  // Static-list-only options are refused, never silently ignored.
  SS_RETURN_IF_ERROR(CheckGossipModeOptions(base));
  auto p = std::make_unique<Parts>();
  p->options = options;
  p->backend = std::move(backend);
  p->clock = common::RealClock::Create();
  p->signals = options.signals;  // Note [Stopping while joining]
  std::optional<QuietHours> quiet;
  if (!options.quiet_hours.empty()) {
    SS_ASSIGN_OR_RETURN(quiet, QuietHours::Parse(options.quiet_hours));
  }
  {
    absl::MutexLock lock(&p->mu);
    p->volunteer = VolunteerPause(quiet, options.time_zone);
  }
  const absl::Duration t0 = p->clock->SteadyNow();
  p->joiner = !options.gossip.join.empty() && options.expect_members == 0;
  if (!p->joiner && options.stages.empty()) {
    return absl::InvalidArgumentError(
        "a founding node (no --join, or --expect_members) needs --host_stages");
  }
  for (int s : options.stages) {
    if (s < 0 || s >= base.model.model.num_stages) {
      return absl::InvalidArgumentError(absl::StrCat("--host_stages: stage ", s, " outside [0, ",
                                                     base.model.model.num_stages, ")"));
    }
  }
  // Note [One port]: every network-facing service registers on one
  // server; its address is our record's (all four endpoints).
  const std::string listen = base.listen.empty() ? "127.0.0.1:0" : base.listen;
  SS_RETURN_IF_ERROR(ParseHostPort(listen, "--listen").status());
  NodeServerOptions server_options;
  server_options.listen_address = listen;
  // Note [gRPC memory quota]: all connections' buffers together, and the
  // synchronous services' threads, bounded by gRPC itself.
  server_options.grpc_memory_quota_bytes =
      GrpcMemoryQuotaBytes(base.model.model, base.model.samples_per_mb);
  server_options.grpc_max_threads = kDaemonGrpcMaxThreads;
  p->server = std::make_unique<NodeServer>(server_options);
  grpc::ServerBuilder* server_builder = p->server->builder();
  SwarmMembershipOptions gossip_options = options.gossip;
  gossip_options.serve_on = server_builder;
  // Our record announces the slots our stage server admits: one value, so
  // the lowering below (Note [Slots re-announced]) only follows a real out
  // of memory.
  gossip_options.memory_slots = static_cast<uint32_t>(std::max(1, base.memory_slots));
  // Note [Checkable evidence], "Signed swarms": one setting, the manifest's.
  if (base.swarm_signs_frames && !base.sign_frames) {
    return absl::InvalidArgumentError("a swarm that signs its frames needs sign_frames");
  }
  gossip_options.sign_frames = base.swarm_signs_frames;
  SS_ASSIGN_OR_RETURN(p->gossip, SwarmMembership::Start(gossip_options, p->clock.get()));
  p->self = p->gossip->id();
  p->status = MakeDaemonStatusBoard(base, "gossip", p->self.Hex(), p->clock.get());
  p->members = std::make_unique<TrainingMembers>(p->self);
  if (gossip_options.admission.mode == membership::AdmissionMode::kOpen &&
      gossip_options.admission.probation_iterations > 0 &&
      !gossip_options.admission.founder_public_key.empty()) {
    // Note [Newcomer probation].
    absl::flat_hash_set<common::NodeId> roots = gossip_options.admission.allowed_ids;
    roots.insert(common::NodeId::FromPublicKey(gossip_options.admission.founder_public_key));
    p->members->SetProbation(std::move(roots));
    p->newcomers = std::make_unique<NewcomerLedger>(
        p->self, gossip_options.admission.probation_iterations);
  }
  p->verify_trust = std::make_unique<VerifyTrust>(
      VerifyTrustOptions{.exclude_at = base.verify_exclude_at});
  p->evidence_bans = std::make_unique<EvidenceBans>();
  p->routing = std::make_unique<VerifiedRoutingView>(p->members->routing(), p->verify_trust.get(),
                                                     p->self, p->evidence_bans.get());
  SS_ASSIGN_OR_RETURN(std::string device, p->backend.prepare(base));

  // Note [Admission]: a selective swarm's services serve admitted ids only;
  // so does an open swarm that asks for join work (Note [Join work]).
  const bool members_only = gossip_options.admission.mode != membership::AdmissionMode::kOpen ||
                            gossip_options.admission.join_work_bits > 0;
  p->quotas = MakeDaemonQuotas(base.model.model, base.model.samples_per_mb, p->clock.get(),
                               members_only);
  {
    // Note [Memory ceiling]: what this node may hold whatever its peers send.
    MemoryCeilingInputs ceiling;
    ceiling.model = base.model.model;
    ceiling.samples_per_mb = base.model.samples_per_mb;
    ceiling.hosted_stages = static_cast<int>(options.stages.size());
    ceiling.memory_slots = base.memory_slots;
    ceiling.quotas = &p->quotas;
    ceiling.grpc_memory_quota_bytes = server_options.grpc_memory_quota_bytes;
    // The relay SetUpRelaying serves (its default circuits per node).
    ceiling.grpc_max_threads = server_options.grpc_max_threads;
    ceiling.relay_slots = options.relay_slots;
    AnnounceMemoryCeiling(base.name, ceiling, &p->metrics);
  }
  GrpcTransportOptions to;
  to.self = p->self;
  to.serve_on = server_builder;
  to.swarm_id = p->gossip->swarm_id();
  to.quota = p->quotas.pipeline;
  // Frames no larger than this model's activations allow, and of exactly
  // the size their declared tensor implies (Note [Frame validation]).
  to.max_payload_bytes = static_cast<uint64_t>(
      model::MaxFramePayloadBytes(base.model.model, base.model.samples_per_mb));
  to.check_tensor_shape = true;
  // Pipeline frames: mutual TLS from our key (Note [Peer authentication]).
  if (p->gossip->insecure()) {
    to.credentials = identity::PeerCredentials::Insecure();
  } else {
    SS_ASSIGN_OR_RETURN(to.credentials,
                        identity::PeerCredentials::Create(
                            {p->gossip->identity(), false}, p->clock->Now()));
  }
  p->credentials = to.credentials;
  SS_ASSIGN_OR_RETURN(std::unique_ptr<GrpcTransport> grpc,
                      GrpcTransport::Create(to, p->clock.get()));
  p->grpc = grpc.get();
  p->transport = std::move(grpc);
  // The operator's caps on a home connection (node/transport/shaping_flags.h):
  // pipeline frames through a ShapingTransport, gradient pushes paced by the
  // replica group (WAN emulation tables need --swarm: CheckGossipModeOptions).
  ShapingOptions caps;
  ApplyBandwidthCaps(base.wan.max_upload_bytes_per_second, base.wan.max_download_bytes_per_second,
                     &caps);
  if (caps.uplink_bytes_per_second > 0 || caps.downlink_bytes_per_second > 0) {
    p->transport =
        std::make_unique<ShapingTransport>(std::move(p->transport), p->clock.get(), caps);
    LOG(INFO) << base.name << ": bandwidth caps: uplink " << caps.uplink_bytes_per_second
              << " B/s, downlink " << caps.downlink_bytes_per_second << " B/s (0: unlimited)";
  }
  if (options.wrap_transport) p->transport = options.wrap_transport(std::move(p->transport));
  GrpcGroupOptions go;
  go.self = p->self;
  go.serve_on = server_builder;
  go.swarm_id = p->gossip->swarm_id();
  go.credentials = to.credentials;  // the replica group too (same key, same rule)
  go.max_upload_bytes_per_second = base.wan.max_sync_upload_bytes_per_second > 0
                                       ? base.wan.max_sync_upload_bytes_per_second
                                       : base.wan.max_upload_bytes_per_second;
  go.codec = base.model.averaging.codec;  // Note [Encoded shards]
  go.robust.outlier_factor = base.outlier_factor;  // Note [Robust averaging]
  go.ban_after = base.ban_after;                    // Note [Group bans]
  go.robust.newcomer_weight = base.newcomer_weight;  // Note [Newcomer weight]
  // Note [Stated bounds in the daemons]: a data node's statement, capped
  // at the largest an honest data node of this swarm makes.
  go.max_stated_bound = TrainingStack::MaxStatedBound(base);
  go.stated_pace = TrainingStack::StatedPace(base);
  go.push_quota = p->quotas.group;
  go.state_quota = p->quotas.state;
  if (base.model.averaging.overlap) {  // Note [Overlapped sync]
    go.keep_iterations += static_cast<uint64_t>(base.model.averaging.outer_every);
  }
  // Note [Retried pushes] (grpc_group_push.cc): a relayed member's failed
  // push is tried again (its relay may have died). The group's thread
  // calls this: it reads the membership through `live_membership`, which
  // the daemon clears before `gossip` goes.
  go.retry_pushes_to = [raw = p.get()](const common::NodeId& id) {
    absl::ReaderMutexLock lock(&raw->link_mu);
    membership::Membership* m = raw->live_membership;
    if (m == nullptr) return false;
    const membership::View view = m->GetView();
    const membership::MemberInfo* mi = view.Find(id);
    return mi != nullptr && mi->outbound_only;
  };
  // Note [Data node entered later] (data_node_wait.h): a relay waiting for a
  // data node in an iteration before the entry of the one that came back
  // passes it. Read through `live_membership` as above.
  go.data_node_enters_after = [raw = p.get()](uint64_t iteration) -> std::optional<uint64_t> {
    absl::ReaderMutexLock lock(&raw->link_mu);
    membership::Membership* m = raw->live_membership;
    if (m == nullptr) return std::nullopt;
    return DataNodeEntersAfter(m->GetView(), iteration);
  };
  // Note [Evidence bans]: weighed with the verify quorum in averaging too.
  go.evidence_bans = [bans = p->evidence_bans.get()] { return bans->adopted(); };
  SS_ASSIGN_OR_RETURN(p->group, GrpcGroupComm::Create(go, p->members->group(), p->clock.get()));
  StateServerOptions so;
  so.self = p->self;
  so.serve_on = server_builder;
  so.swarm_id = p->gossip->swarm_id();
  so.credentials = to.credentials;
  so.quota = p->quotas.state;
  so.fail_first_transfers = options.fail_first_state_transfers;
  Parts* raw = p.get();
  so.in_iteration = [raw](int stage, uint64_t boundary) {
    return raw->SnapshotInIteration(stage, boundary);
  };
  SS_ASSIGN_OR_RETURN(p->state,
                      StateServer::Create(so, [raw](int stage) { return raw->Snapshot(stage); }));
  SS_RETURN_IF_ERROR(p->StartCopies());
  // Note [Reachability at join]: peers dial our advertised address back.
  p->reachability_options.self = p->self;
  p->reachability_options.credentials = to.credentials;
  p->reachability_options.swarm_id = p->gossip->swarm_id();
  p->reachability_options.dial_timeout = options.dial_back_timeout;
  p->reachability = std::make_unique<ReachabilityService>(p->reachability_options);
  server_builder->RegisterService(p->reachability.get());
  p->SetUpRelaying(server_builder, p->gossip->swarm_id());  // Note [Relayed members]
  p->SetUpEvidence(server_builder, p->gossip->swarm_id());  // Note [Evidence bans]
  SS_RETURN_IF_ERROR(p->server->Start(to.credentials));
  // Note [Advertise auto] (advertise_auto.h): with --advertise=auto, or by
  // default on a joiner listening on an unspecified host, the record starts
  // with the local address and the reachability check settles it.
  const std::optional<int> auto_port = ParseAutoAdvertise(options.advertise);
  const bool auto_by_default = options.advertise.empty() && !options.gossip.join.empty() &&
                               IsUnspecifiedHost(ParseHostPort(listen, "--listen")->host);
  SS_ASSIGN_OR_RETURN(const std::string advertised,
                      ResolveAdvertiseAddress(listen, auto_port ? "" : options.advertise,
                                              p->server->port(), options.gossip.join));
  if (auto_port.has_value() || auto_by_default) {
    p->advertise_auto_port = auto_port.value_or(0) > 0 ? *auto_port : p->server->port();
  }
  p->advertised = advertised;
  p->status->SetAddress(advertised);
  DaemonEndpoints endpoints;
  endpoints.gossip = endpoints.pipeline = endpoints.group = endpoints.state = advertised;
  SS_RETURN_IF_ERROR(p->gossip->CreateMembership(endpoints));
  p->MakeHealth();  // the server runs: health changes reach it
  membership::Membership* m = p->gossip->membership();
  m->AddListener([raw, m, members_only](const membership::MemberChange& c) {
    const membership::View view = m->GetView();
    raw->members->Update(raw->RoutedView());  // Note [Relayed members]
    // Note [Peer quotas]: members on probation get the newcomer budget.
    raw->quotas.members->SetMembers(QuotaMemberIds(view, members_only),
                                    raw->members->Untrusted());
    raw->status->UpdateView(view);
    raw->health->ObservePeers(LivePeers(view));
    raw->OnMemberChange(c);
  });
  p->members->SetAddressListener([raw](const PeerInfo& peer) {
    raw->transport->SetPeerAddress(peer.id, peer.address);
  });
  p->members->Update(p->RoutedView());
  p->quotas.members->SetMembers(QuotaMemberIds(m->GetView(), members_only),
                                p->members->Untrusted());
  // Note [Revocation]: revoked ids get nothing from the data services, in
  // an open swarm too (~GossipDaemon clears the check before `gossip` goes).
  p->quotas.members->SetRevokedCheck([m](const common::NodeId& id) { return m->IsRevoked(id); });
  p->status->UpdateView(m->GetView());
  LOG(INFO) << base.name << " (" << p->self << "): "
            << (p->joiner ? "joiner" : "founder") << ", device " << device << ", seed "
            << base.model.seed << "; listening on " << listen << " (port " << p->server->port()
            << "), advertised as " << advertised;
  std::printf("listening on %s, advertised as %s\n", listen.c_str(), advertised.c_str());
  std::fflush(stdout);

  // Bootstrap (the error names the failed step and a hint), then the
  // reachability check (gossip_daemon_setup.cc).
  SS_RETURN_IF_ERROR(p->JoinAndCheckReachability());
  {
    absl::MutexLock lock(&p->mu);
    p->timeline.process_age = options.process_age_at_start;
    p->timeline.start = t0;
    p->timeline.bootstrapped = p->clock->SteadyNow();
  }

  // Which stages: given, or the allocation's answer for a joiner.
  std::vector<int> stages = options.stages;
  if (stages.empty()) {
    SS_ASSIGN_OR_RETURN(stages, p->PlaceJoiner());
  }
  p->hosted.Set(stages);
  if (p->joiner) {
    for (const StateSource& a : StateSources(p->RoutedView(), p->self, stages.front())) {
      absl::StatusOr<uint64_t> it = QuerySourceIteration(a, p->credentials, absl::Seconds(2));
      if (!it.ok()) continue;
      p->source_first_iteration = *it;
      p->source_first_asked = p->clock->SteadyNow();
      break;
    }
  }
  p->status->SetStages(stages);
  SS_RETURN_IF_ERROR(p->BuildTraining());
  {
    absl::MutexLock lock(&p->mu);
    p->timeline.placed = p->clock->SteadyNow();
  }
  auto daemon = std::unique_ptr<GossipDaemon>(new GossipDaemon(std::move(p)));
  SS_RETURN_IF_ERROR(daemon->parts_->StartControl());
  return daemon;
}

absl::Status GossipDaemon::Parts::StartCopies() {
  const NodeDaemonOptions& o = base();
  if (options.checkpoint_copies <= 0 || o.checkpoint_every <= 0) return absl::OkStatus();
  if (!o.model.checkpoint_dir.empty()) {
    SS_ASSIGN_OR_RETURN(copy_store,
                        CopyStore::Open(absl::StrCat(o.model.checkpoint_dir, "/", o.name, "-copies"),
                                        options.keep_copies));
    // A restarted holder serves what its disk kept (the restorer checks
    // each copy's header before use).
    for (const auto& [stage, it] : copy_store->List()) {
      absl::StatusOr<std::string> bytes = copy_store->Read(stage, it);
      if (!bytes.ok()) continue;
      state->HoldCopy(stage, it, StageSnapshot{*std::move(bytes), 0}, options.keep_copies);
    }
    if (!copy_store->List().empty()) {
      LOG(INFO) << o.name << ": serving " << copy_store->List().size()
                << " checkpoint copies kept on disk";
    }
  }
  CopierOptions co;
  co.self = self;
  co.credentials = credentials;
  co.swarm_id = gossip->swarm_id();
  co.keep = options.keep_copies;
  const model::ModelConfig config = o.model.model;
  co.max_bytes = [config](int stage) {
    return StateBytesBound(static_cast<uint64_t>(config.StageParameterCount(stage)));
  };
  copier = std::make_unique<CheckpointCopier>(co, state.get(), copy_store.get());
  return absl::OkStatus();
}

void GossipDaemon::Parts::PublishCheckpoint(uint64_t next) {
  const NodeDaemonOptions& o = base();
  if (copier == nullptr || next % static_cast<uint64_t>(o.checkpoint_every) != 0) return;
  for (const auto& [stage, compute] : computes) {
    absl::StatusOr<StageSnapshot> snap = Snapshot(stage);
    if (!snap.ok()) {
      LOG(WARNING) << o.name << ": cannot publish stage " << stage << " at " << next
                   << " for copies: " << snap.status();
      continue;
    }
    state->Publish(stage, next, *std::move(snap));
  }
}

void GossipDaemon::Parts::RequestCopies(uint64_t next) {
  const NodeDaemonOptions& o = base();
  if (copier == nullptr || next % static_cast<uint64_t>(o.checkpoint_every) != 0) return;
  const membership::View view = gossip->membership()->GetView();
  for (int stage = 0; stage < o.model.model.num_stages; ++stage) {
    if (computes.count(stage) > 0 ||
        !IsCopyHolder(view, self, stage, options.checkpoint_copies)) {
      continue;
    }
    copier->Request(stage, next, StateSources(view, self, stage));
  }
}

absl::Status GossipDaemon::Parts::StartControl() {
  return absl::OkStatus();
}

GossipDaemon::GossipDaemon(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {
  Parts& p = *parts_;
  if (p.options.control_port < 0) return;
  p.control_service = std::make_unique<ControlService>(this);
  grpc::ServerBuilder builder;
  // Exclusive ports: gRPC sets SO_REUSEPORT by default, which let a second
  // daemon on the same port start a second swarm silently.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  int port = 0;
  builder.AddListeningPort(absl::StrCat("127.0.0.1:", p.options.control_port),
                           grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(p.control_service.get());
  p.control = builder.BuildAndStart();
  if (p.control == nullptr || port == 0) {
    LOG(ERROR) << p.base().name << ": cannot serve NodeControl on port " << p.options.control_port
               << " (in use?); see --control_port";
    return;
  }
  LOG(INFO) << p.base().name << ": control on 127.0.0.1:" << port
            << " (skipswarm node drain --control=127.0.0.1:" << port << ")";
  std::printf("control 127.0.0.1:%d\n", port);
  std::fflush(stdout);
}

// Note [One port]: a daemon serves every gRPC service (pipeline frames,
// replica group, gossip, state transfer, gRPC health) on one NodeServer
// bound to --listen, and puts one address (--advertise, by default the
// listen address with its port and an unspecified host resolved) in its
// record for all of them: one port to forward or open, one address a
// reachability check can dial back. The services are made first with
// serve_on = the server's builder (gRPC registers services only before it
// starts), then the server binds; since every service borrows that server,
// it is shut down before any of them is destroyed. NodeControl (drain)
// stays apart, on loopback only: it has no authentication of its own.
//
// Note [Stopping]: every stop ends within a bound, with a checkpoint. A
// signal while founders wait for the swarm to form ends the wait at once
// (nothing trained; the state it was built or resumed with is saved, exit 0).
// SIGINT stops after the current iteration; SIGTERM drains (leaves after its
// exit iteration), or, when leaving would lose a stage (the last replica,
// without --force), stops like SIGINT instead of being ignored. A stop signs
// LEFT before its checkpoint and push flush: at once with its exit
// iteration like a drain (Note [Leaving]), or, as a stage's last replica,
// once its trainer ended (Run). While
// training is paused (a stage has no live replica: the data nodes cannot
// plan, Note [Paused training]) no iteration will finish, so a stop, a
// drain's included, abandons the current one at once; a replica waiting
// there used to sit out the whole bound, which put its exit past 30 s. An
// iteration that was in flight when the stage went is abandoned too: the
// node's checkpoint is then one step behind its stage's other replicas, as
// after a stop that runs out of time. A stop whose iteration has not
// finished within options.stop_timeout (default 30 s: a peer never
// answers) abandons it the same way: the training stack goes first (its
// callbacks end), then the checkpoint of the last finished step is written
// ("NAME: checkpoint of step N written to DIR" on stdout) and the node
// leaves. A second SIGINT or SIGTERM exits at once from the signal handler
// (cli/gossip_command.cc).
//
// Note [Gossip daemon teardown]: who calls whom decides the order.
//  - The trainer's iteration callback (Parts::OnIteration, on a trainer
//    thread) uses the gossip side (records, view, compute speed), `members`,
//    `state`, `metrics` and may start a stage move's worker (StepMove).
//  - A move's worker uses the gossip side (announce, view, state fetch).
//  - Gossip's listeners use `members`, `transport` and `metrics`, never the
//    stack.
// So: no more drain requests (control), then the stack, whose trainer's
// destructor waits for an iteration callback in progress and turns later
// ones into no-ops (node_trainer.h), so no new move worker can start; then
// the worker; then gossip. On the drain-timeout path Run returns with the
// trainer still mid-iteration (waiting on a peer), which is why this order
// matters: gossip must not go while a callback can still reach it.
GossipDaemon::~GossipDaemon() {
  Parts& p = *parts_;
  if (p.control) p.control->Shutdown(common::SystemDeadlineAfter(absl::Seconds(1)));
  {
    absl::WriterMutexLock lock(&p.link_mu);  // no more link reports
    p.live_membership = nullptr;
  }
  p.ReplaceStack(nullptr);  // detaches the server, then waits out the trainer's callback
  std::thread worker;  // a move's: ends within its fetch deadline
  {
    absl::MutexLock lock(&p.mu);
    if (p.move != nullptr) worker = std::move(p.move->worker);
  }
  if (worker.joinable()) worker.join();
  p.relay_attacher.reset();  // its record updates need `gossip`
  if (p.relay_service) p.relay_service->Shutdown();  // ends the Attach streams it serves
  // Note [One port]: the one server goes before any service registered on
  // it (gossip's, then transport, group and state with the parts).
  if (p.server) p.server->Shutdown(absl::ZeroDuration());
  // No listener call (one may be in flight) after this: they read the two below.
  if (p.gossip && p.gossip->membership()) p.gossip->membership()->Shutdown();
  p.relay_dialer.reset();  // its relay lookups read `gossip`'s view
  if (p.quotas.members) p.quotas.members->SetRevokedCheck(nullptr);  // it reads `gossip`
  p.gossip.reset();
}

// Note [Newcomer probation]: our record names the replicas whose digests
// matched ours for the probation length, less the ones our output checks
// caught since (Note [Vouch withdrawal] in newcomer_ledger.h) and the ones
// they condemned; re-signed only when that changes.
void GossipDaemon::Parts::VouchFor(const NodeIterationReport& r) {
  // Taken at every boundary, so the set stays bounded without probation too.
  const std::vector<common::NodeId> mismatched =
      verify_trust != nullptr ? verify_trust->TakeMismatched() : std::vector<common::NodeId>{};
  if (newcomers == nullptr) return;
  bool changed = false;
  for (const auto& [stage, step] : r.stages) {
    if (step.digests.size() > 1) {
      changed |= newcomers->Observe(r.iteration, step.digests, step.digest_before);
    }
  }
  for (const common::NodeId& id : mismatched) {
    if (newcomers->Withdraw(id)) {
      changed = true;
      LOG(WARNING) << options.base.name << ": withdrawing our vouch for " << id.ShortString()
                   << ": our output checks recorded a mismatch naming it (Note [Vouch "
                      "withdrawal])";
    }
  }
  metrics.Set("skipswarm_members_on_probation", members->OnProbation());
  if (!changed) return;
  std::vector<common::NodeId> vouched = newcomers->Vouched();
  if (verify_trust != nullptr) {
    vouched.erase(std::remove_if(vouched.begin(), vouched.end(),
                                 [&](const common::NodeId& id) {
                                   return verify_trust->Condemned(id);
                                 }),
                  vouched.end());
  }
  metrics.Set("skipswarm_vouches", static_cast<double>(vouched.size()));
  absl::Status s = gossip->membership()->UpdateLocalRecord([&](proto::NodeRecord* record) {
    record->clear_vouches();
    for (const common::NodeId& id : vouched) record->add_vouches(id.Bytes());
  });
  if (!s.ok()) {
    LOG(WARNING) << options.base.name << ": cannot publish our vouches: " << s;
  } else {
    LOG(INFO) << options.base.name << ": our record vouches for " << vouched.size()
              << " replica(s) after " << options.gossip.admission.probation_iterations
              << " iterations of matching digests";
  }
}

// Note [Gossiped bans]: our record names the members this node banned on its
// own evidence (GrpcGroupComm::banned(), never the bans it only adopted: a
// published ban is first-hand) and the members its output checks condemned
// (Note [Verify trust]), ascending, the first kMaxRecordBans of them;
// re-signed only when that changes.
void GossipDaemon::Parts::PublishBans() {
  if (group == nullptr) return;
  std::set<common::NodeId> own;
  for (const auto& [id, reason] : group->banned()) own.insert(id);
  if (verify_trust != nullptr) {
    const std::vector<common::NodeId> condemned = verify_trust->condemned();
    metrics.Set("skipswarm_verify_excluded", static_cast<double>(condemned.size()));
    own.insert(condemned.begin(), condemned.end());
  }
  std::vector<common::NodeId> bans;
  for (const common::NodeId& id : own) {
    if (bans.size() == kMaxPublishedBans) break;
    bans.push_back(id);
  }
  if (bans == published_bans) return;
  absl::Status s = gossip->membership()->UpdateLocalRecord([&](proto::NodeRecord* record) {
    record->clear_bans();
    for (const common::NodeId& id : bans) record->add_bans(id.Bytes());
  });
  if (!s.ok()) {
    LOG(WARNING) << options.base.name << ": cannot publish our bans: " << s;
    return;
  }
  published_bans = std::move(bans);
  LOG(INFO) << options.base.name << ": our record names " << published_bans.size()
            << " banned member(s)";
}

void GossipDaemon::Parts::OnIteration(const NodeIterationReport& r) {
  const NodeDaemonOptions& o = base();
  const uint64_t next = r.iteration + 1;
  // The boundary: the faces move on (a joiner announced for `next` enters
  // the group), joiners waiting for this boundary get their snapshot.
  members->SetIteration(next);
  PublishCheckpoint(next);
  // Note [Digest on demand] (node_trainer.h): the step's digests, none
  // taken again here.
  std::vector<int> hosted;
  for (const auto& [s, c] : computes) hosted.push_back(s);
  state->OnBoundary(next, StepDigests(r, hosted));
  RequestCopies(next);
  {
    absl::MutexLock lock(&mu);
    if (joiner && timeline.entry == r.iteration && !r.stages.empty()) {
      timeline.first_step = clock->SteadyNow();
      timeline.digest_after_first_step = r.stages.begin()->second.digest_after;
    } else if (joiner && timeline.entry + 1 == r.iteration && !r.stages.empty()) {
      // The digests compared in this reduce are the ones after our first step.
      timeline.digests_checked = r.stages.begin()->second.digests_agree ? 1 : 0;
    }
  }
  ReportJoin();
  StepMove(r.iteration);
  VouchFor(r);
  PublishBans();
  ConsiderEvidence();  // Note [Evidence bans]: queues fetches only

  // Our measured speed into our record, when it moved (Note [Measured speeds]).
  std::optional<double> v = speed->TakePublishable(clock->SteadyNow());
  if (options.fixed_compute_speed > 0) {  // an emulated node (tests, experiments)
    v = r.iteration == static_cast<uint64_t>(start_iteration)
            ? std::optional<double>(options.fixed_compute_speed)
            : std::nullopt;
  }
  if (v.has_value()) {
    absl::Status s = gossip->membership()->SetComputeSpeed(*v);
    if (!s.ok()) LOG(WARNING) << o.name << ": cannot publish our compute speed: " << s;
    if (s.ok()) {
      LOG(INFO) << o.name << ": measured compute speed " << *v
                << " s per layer per sample (published in our record)";
    }
    metrics.Set("skipswarm_seconds_per_layer_sample", *v);
  }
  // Note [Slots re-announced] (membership.h): an out of memory lowered the
  // server's slots (Note [Memory slots] in node/stage/stage_server.cc); the
  // record says so from this boundary on, so the data nodes' planners stop
  // giving this node more micro-batches than it can hold.
  if (r.server.memory_slots > 0) {
    absl::StatusOr<bool> lowered =
        gossip->membership()->LowerMemorySlots(static_cast<uint32_t>(r.server.memory_slots));
    if (!lowered.ok()) {
      LOG(WARNING) << o.name << ": cannot publish our lowered memory slots: " << lowered.status();
    } else if (*lowered) {
      LOG(WARNING) << o.name << ": memory slots lowered to " << r.server.memory_slots
                   << " after an out of memory; re-announced in our record";
    }
  }
  const double elapsed = Seconds(clock->SteadyNow() - run_started);
  const membership::View view = gossip->membership()->GetView();
  metrics.Set("skipswarm_live_members", static_cast<double>(view.Live().size()));
  ExportQuotaRefusals(quotas, &gossip->membership()->quota(), &metrics);
  ExportFramesRefused(grpc->stats().frames_refused, &metrics);
  metrics.Set("skipswarm_admission_refusals_total",
              static_cast<double>(gossip->membership()->stats().admission_refused));
  if (options.manifest_quota != nullptr) {
    ExportQuotaRefusals(DaemonQuotas{}, options.manifest_quota, &metrics);
  }
  ExportEvidenceMetrics();
  if (relay_service != nullptr) ExportRelayStats(relay_service->stats(), &metrics);
  health->ObserveIteration(r);  // NOT_SERVING while the loss is not finite
  status->UpdateView(view);     // the links' latest measurements
  status->ObserveIteration(r);
  PrintProgressAndCheckpoint(o, r, elapsed, &metrics, [this] { return Checkpoint(); });
  if (options.observer) options.observer(r);
}

}  // namespace skipswarm::node
