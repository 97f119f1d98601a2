#include "node/daemon/static_swarm/node_daemon.h"

#include <glog/logging.h>
#include <grpcpp/resource_quota.h>

#include <cstdio>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/real_clock.h"
#include "common/status_macros.h"
#include "membership/view.h"
#include "model/memory_estimate.h"
#include "node/compute/task_runner.h"
#include "node/daemon/reporting/daemon_reporting.h"
#include "node/daemon/reporting/daemon_quotas.h"
#include "node/daemon/reporting/memory_ceiling.h"
#include "node/daemon/reporting/metrics.h"
#include "node/daemon/reporting/pause_meter.h"
#include "node/daemon/reporting/serving_health.h"
#include "node/daemon/reporting/status_board.h"
#include "node/daemon/stack/planner_factory.h"
#include "node/daemon/stack/stage_checkpoints.h"
#include "node/daemon/stack/training_stack.h"
#include "node/daemon/static_swarm/swarm_spec_tls.h"
#include "node/train/grpc_group.h"
#include "node/train/scheduler_repairer.h"
#include "node/transport/grpc_transport.h"
#include "node/transport/shaping_transport.h"
#include "node/transport/wan_table.h"

namespace skipswarm::node {

// Declaration order is destruction order reversed: things that call into
// others are declared after them, so they go first.
struct NodeDaemon::Parts {
  NodeDaemonOptions options;
  common::NodeId self;
  std::vector<int> stages;
  std::unique_ptr<common::RealClock> clock;
  std::unique_ptr<DataSource> data;  // data nodes only
  std::map<int, std::unique_ptr<StageCompute>> computes;
  // SDP backward masking's frozen copies (Note [SDP frozen stages]).
  std::map<int, std::unique_ptr<StageCompute>> frozen;
  std::unique_ptr<ThreadTaskRunner> runner;  // joined before the computes go
  std::unique_ptr<StaticSwarmView> view;
  StaticSwarmTls tls;  // the identity outlives the transport and group
  DaemonQuotas quotas;  // Note [Peer quotas]: members are the --swarm list
  // Note [gRPC memory quota]: shared by the pipeline's and the group's
  // servers (a static node serves each on its own port).
  std::shared_ptr<grpc::ResourceQuota> grpc_quota;
  std::unique_ptr<Transport> transport;  // gRPC, shaped when options.wan says so
  GrpcTransport* grpc = nullptr;         // inside `transport`
  std::unique_ptr<GrpcGroupComm> group;
  std::unique_ptr<RouteRepairer> repairer;  // the stack borrows it
  std::unique_ptr<TrainingStack> stack;     // server, planner, driver, trainer
  Metrics metrics;
  std::unique_ptr<ServingHealth> health;  // the gRPC health status, with reasons
  std::unique_ptr<PauseMeter> pauses;     // skipswarm_training_paused* on /metrics
  std::unique_ptr<StatusBoard> status;     // the status page's data (no gossip view)
  std::unique_ptr<MetricsServer> metrics_server;
  int64_t start_iteration = 0;
  absl::Duration run_started;
  // Members this node last saw dead (trainer thread), for the page's events.
  std::set<common::NodeId> seen_dead;

  absl::Status Checkpoint() {
    if (options.model.checkpoint_dir.empty()) return absl::OkStatus();
    SS_RETURN_IF_ERROR(SaveStageCheckpoints(options, BorrowComputes(computes)));
    LOG(INFO) << options.name << ": checkpointed step " << computes.begin()->second->step()
              << " to " << options.model.checkpoint_dir;
    return absl::OkStatus();
  }
  void OnIteration(const NodeIterationReport& r);
  absl::Status WrapWithShaping();
};

// WAN emulation / operator caps: wraps the gRPC transport.
absl::Status NodeDaemon::Parts::WrapWithShaping() {
  const NodeDaemonOptions::Wan& w = options.wan;
  WanShaping shaping;
  if (!w.wan_table.empty()) {
    SS_ASSIGN_OR_RETURN(WanTable table, ReadWanTable(w.wan_table));
    SS_ASSIGN_OR_RETURN(shaping, WanShapingFor(table, options.name, w.time_scale));
    for (const std::string& m : shaping.missing) {
      LOG(WARNING) << options.name << ": no WAN link to " << m << " (left unshaped)";
    }
  }
  ApplyBandwidthCaps(w.max_upload_bytes_per_second, w.max_download_bytes_per_second,
                     &shaping.options);
  if (w.wan_table.empty() && shaping.options.uplink_bytes_per_second <= 0 &&
      shaping.options.downlink_bytes_per_second <= 0) {
    return absl::OkStatus();
  }
  auto shaped = std::make_unique<ShapingTransport>(std::move(transport), clock.get(),
                                                   shaping.options);
  for (const SwarmMember& m : options.swarm) {
    auto link = shaping.links.find(m.name);
    if (link != shaping.links.end()) shaped->SetLink(m.info.id, link->second);
  }
  LOG(INFO) << options.name << ": shaped transport: " << shaping.links.size()
            << " WAN links (time scale " << w.time_scale << "), uplink "
            << shaping.options.uplink_bytes_per_second << " B/s, downlink "
            << shaping.options.downlink_bytes_per_second << " B/s (0: unlimited)";
  transport = std::move(shaped);
  return absl::OkStatus();
}

namespace {

std::string StagesString(const std::vector<int>& stages) {
  std::string s;
  for (int x : stages) absl::StrAppend(&s, s.empty() ? "" : "+", x);
  return s;
}

}  // namespace

absl::StatusOr<std::unique_ptr<NodeDaemon>> NodeDaemon::Create(const NodeDaemonOptions& options,
                                                              const NodeBackend& backend) {
  auto p = std::make_unique<Parts>();
  p->options = options;
  const SwarmMember* me = nullptr;
  std::vector<PeerInfo> members;
  for (const SwarmMember& m : options.swarm) {
    members.push_back(m.info);
    if (m.name == options.name) me = &m;
  }
  if (me == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("--name '", options.name,
                                                   "' is not in --swarm"));
  }
  // A subnetwork member says so in the list (swarm_spec.h) and runs --sdp;
  // either alone would plan the wrong routes.
  if (me->info.subnetwork != (options.sdp != model::SdpMode::kOff)) {
    return absl::InvalidArgumentError(
        me->info.subnetwork
            ? absl::StrCat("--swarm marks '", options.name,
                           "' as a subnetwork member (sdp:): run it with --sdp=forward|backward")
            : absl::StrCat("--sdp=", model::SdpModeName(options.sdp), ": mark '", options.name,
                           "' as a subnetwork member in --swarm (its stages as sdp:0+..)"));
  }
  p->self = me->info.id;
  p->stages = me->info.stages;
  p->clock = common::RealClock::Create();
  SS_ASSIGN_OR_RETURN(std::string device, backend.prepare(options));
  LOG(INFO) << options.name << " (" << p->self << "): stages " << StagesString(p->stages)
            << ", device " << device << ", seed " << options.model.seed;

  // Compute and, on data nodes, data.
  p->runner = std::make_unique<ThreadTaskRunner>();
  for (int s : p->stages) {
    SS_ASSIGN_OR_RETURN(p->computes[s],
                        backend.create_compute(options, s, p->runner.get(), p->clock.get()));
  }
  SS_ASSIGN_OR_RETURN(p->frozen, backend.create_frozen(options, p->stages, p->runner.get()));
  if (p->computes.count(0) > 0) {
    SS_ASSIGN_OR_RETURN(p->data, backend.create_data(options));
  }

  // Resume.
  SS_ASSIGN_OR_RETURN(p->start_iteration,
                      ResumeFromStageCheckpoints(options, BorrowComputes(p->computes)));

  // Network.
  p->view = std::make_unique<StaticSwarmView>(members);
  p->quotas = MakeDaemonQuotas(options.model.model, options.model.samples_per_mb, p->clock.get());
  {
    std::vector<common::NodeId> listed;
    for (const PeerInfo& m : members) listed.push_back(m.id);
    p->quotas.members->SetMembers(listed);
  }
  {
    p->grpc_quota = std::make_shared<grpc::ResourceQuota>("skipswarm-node");
    const int64_t grpc_bytes =
        GrpcMemoryQuotaBytes(options.model.model, options.model.samples_per_mb);
    p->grpc_quota->Resize(static_cast<size_t>(grpc_bytes));
    p->grpc_quota->SetMaxThreads(kDaemonGrpcMaxThreads);
    MemoryCeilingInputs ceiling;
    ceiling.model = options.model.model;
    ceiling.samples_per_mb = options.model.samples_per_mb;
    ceiling.hosted_stages = static_cast<int>(p->stages.size());
    ceiling.memory_slots = options.memory_slots;
    ceiling.quotas = &p->quotas;
    ceiling.grpc_memory_quota_bytes = grpc_bytes;
    AnnounceMemoryCeiling(options.name, ceiling, &p->metrics);
  }
  GrpcTransportOptions to;
  to.self = p->self;
  to.listen_address = options.listen.empty() ? me->info.address : options.listen;
  to.quota = p->quotas.pipeline;
  to.resource_quota = p->grpc_quota;
  to.swarm_id = options.swarm_id;
  // Frames no larger than this model's activations allow, and of exactly
  // the size their declared tensor implies (Note [Frame validation]).
  to.max_payload_bytes = static_cast<uint64_t>(
      model::MaxFramePayloadBytes(options.model.model, options.model.samples_per_mb));
  to.check_tensor_shape = true;
  // Note [Static swarm security]: TLS pinned to the list's node ids, or
  // plain text behind --insecure.
  SS_ASSIGN_OR_RETURN(p->tls, StaticSwarmTls::Create({options.key_file, options.insecure},
                                                     options.swarm, options.name,
                                                     p->clock->Now()));
  LOG(INFO) << options.name << ": "
            << (p->tls.credentials->insecure() ? "plain text (--insecure)"
                                               : "mutual TLS, peers pinned to their --swarm ids");
  to.credentials = p->tls.credentials;
  {
    SS_ASSIGN_OR_RETURN(std::unique_ptr<GrpcTransport> grpc,
                        GrpcTransport::Create(to, p->clock.get()));
    p->grpc = grpc.get();
    p->transport = std::move(grpc);
  }
  SS_RETURN_IF_ERROR(p->WrapWithShaping());
  {
    std::vector<PeerId> ids;
    for (const PeerInfo& m : members) ids.push_back(m.id);
    p->transport = std::make_unique<ListedPeersOnlyTransport>(std::move(p->transport), ids);
  }
  for (const PeerInfo& m : members) {
    if (m.id != p->self) p->transport->SetPeerAddress(m.id, m.address);
  }
  GrpcGroupOptions go;
  go.self = p->self;
  go.listen_address = options.group_listen.empty() ? me->info.group_address : options.group_listen;
  go.swarm_id = options.swarm_id;
  go.credentials = to.credentials;
  go.members_only = true;  // the list is the whole swarm
  go.push_quota = p->quotas.group;
  go.resource_quota = p->grpc_quota;
  go.state_quota = p->quotas.state;
  // The operator's upload cap paces gradient pushes too (0: none).
  go.max_upload_bytes_per_second = options.wan.max_sync_upload_bytes_per_second > 0
                                       ? options.wan.max_sync_upload_bytes_per_second
                                       : options.wan.max_upload_bytes_per_second;
  go.codec = options.model.averaging.codec;  // Note [Encoded shards]
  go.robust.outlier_factor = options.outlier_factor;  // Note [Robust averaging]
  go.ban_after = options.ban_after;                    // Note [Group bans]
  // Note [Stated bounds in the daemons]: a data node's statement, capped
  // at the largest an honest data node of this swarm makes.
  go.max_stated_bound = TrainingStack::MaxStatedBound(options);
  go.stated_pace = TrainingStack::StatedPace(options);
  if (options.model.averaging.overlap) {  // Note [Overlapped sync]
    go.keep_iterations += static_cast<uint64_t>(options.model.averaging.outer_every);
  }
  SS_ASSIGN_OR_RETURN(p->group, GrpcGroupComm::Create(go, p->view.get(), p->clock.get()));

  // Failed hops are re-routed at the planner's costs (DaemonRepairerOptions).
  p->repairer = std::make_unique<SchedulerRouteRepairer>(
      DaemonRepairerOptions(options, p->clock.get()));
  TrainingStackInputs in;
  in.transport = p->transport.get();
  in.clock = p->clock.get();
  in.routing = p->view.get();
  in.group = p->group.get();
  in.repairer = p->repairer.get();
  in.stages = BorrowComputes(p->computes);
  in.frozen = BorrowComputes(p->frozen);
  in.data = p->data.get();
  in.swarm_id = options.swarm_id;
  for (const SwarmMember& m : options.swarm) in.names[m.name] = m.info.id;
  p->status = MakeDaemonStatusBoard(options, "static", p->self.Hex(), p->clock.get());
  p->status->SetStages(p->stages);
  p->status->SetAddress(me->info.address);
  StatusBoard* status = p->status.get();
  Parts* raw = p.get();
  p->health = std::make_unique<ServingHealth>(
      options.name,
      [grpc = p->grpc, status, raw](bool serving) {
        grpc->SetServing(serving);
        status->AddEvent("health", serving ? std::string("SERVING")
                                           : absl::StrCat("NOT_SERVING: ", raw->health->Reasons()));
      },
      &p->metrics);
  ServingHealth* health = p->health.get();
  status->SetHealth(health);
  std::map<common::NodeId, std::string> names;
  for (const SwarmMember& m : options.swarm) names[m.info.id] = m.name;
  status->SetMemberNames(std::move(names));
  p->pauses = std::make_unique<PauseMeter>(p->clock.get(), &p->metrics);
  PauseMeter* pauses = p->pauses.get();
  in.on_pause_change = [health, pauses, status](const absl::Status& why) {
    health->Set("paused", why);
    pauses->OnPauseChange(why);
    status->SetPaused(!why.ok(), std::string(why.message()));  // the page's badge
  };
  SS_ASSIGN_OR_RETURN(p->stack, TrainingStack::Create(options, in));
  SS_ASSIGN_OR_RETURN(p->metrics_server,
                      StartDaemonMetricsServer(options, &p->metrics, p->status.get()));
  return std::unique_ptr<NodeDaemon>(new NodeDaemon(std::move(p)));
}

NodeDaemon::NodeDaemon(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}

NodeDaemon::~NodeDaemon() {
  // The server detaches before anything it borrows goes (training_stack.h).
  parts_->stack.reset();
}

void NodeDaemon::Parts::OnIteration(const NodeIterationReport& r) {
  const double elapsed = absl::ToDoubleSeconds(clock->SteadyNow() - run_started);
  health->ObserveIteration(r);  // NOT_SERVING while the loss is not finite
  status->ObserveIteration(r);
  // The static list as the status page's swarm: alive or dead as this
  // node's transport saw them (no gossip, so no links or speeds).
  membership::View v;
  v.self = self;
  for (const PeerInfo& m : view->Members()) {
    membership::MemberInfo info;
    info.id = m.id;
    const bool alive = view->IsAlive(m.id);
    info.state = alive ? proto::MEMBER_STATE_ALIVE : proto::MEMBER_STATE_DEAD;
    if (!alive && seen_dead.insert(m.id).second) {
      std::string name = m.id.ShortString();
      for (const SwarmMember& s : options.swarm) {
        if (s.info.id == m.id) name = s.name;
      }
      status->AddEvent("member", absl::StrCat(name, " ALIVE -> DEAD (its hops failed)"));
    }
    info.addresses = {m.address};
    info.stages.assign(m.stages.begin(), m.stages.end());
    info.memory_slots = static_cast<uint32_t>(m.memory_slots);
    v.members.push_back(std::move(info));
  }
  status->UpdateView(v);
  ExportQuotaRefusals(quotas, nullptr, &metrics);
  ExportFramesRefused(grpc->stats().frames_refused, &metrics);
  PrintProgressAndCheckpoint(options, r, elapsed, &metrics, [this] { return Checkpoint(); });
}

absl::Status NodeDaemon::Run(const std::atomic<bool>* stop) {
  Parts& p = *parts_;
  if (p.start_iteration >= p.options.iterations) {
    LOG(INFO) << p.options.name << ": already trained " << p.start_iteration << " iterations";
    return absl::OkStatus();
  }
  // Note [Stopping] (gossip_daemon.cc): a signal while the swarm forms
  // ends the wait at once.
  absl::Status formed = p.group->AwaitPeers(
      p.options.startup_timeout, [stop] { return stop != nullptr && stop->load(); });
  if (absl::IsCancelled(formed)) {
    LOG(INFO) << p.options.name << ": " << formed.message() << "; nothing trained, exiting";
    return absl::OkStatus();
  }
  SS_RETURN_IF_ERROR(formed);
  LOG(INFO) << p.options.name << ": all " << p.options.swarm.size()
            << " members answer; training iterations " << p.start_iteration << ".."
            << p.options.iterations - 1;
  p.run_started = p.clock->SteadyNow();
  absl::Notification finished;
  absl::Status result;
  p.stack->trainer()->Run(
      p.start_iteration, p.options.iterations - p.start_iteration,
      [&p](const NodeIterationReport& r) { p.OnIteration(r); },
      [&](absl::Status s) {
        result = s;
        finished.Notify();
      });
  bool stopping = false;
  absl::Duration stop_started;
  while (!finished.WaitForNotificationWithTimeout(absl::Milliseconds(100))) {
    if (!stopping && stop != nullptr && stop->load()) {
      LOG(INFO) << p.options.name << ": stopping after the current iteration";
      p.stack->trainer()->Stop();
      stopping = true;
      stop_started = p.clock->SteadyNow();
    }
    // Note [Stopping]: a stop ends within stop_timeout; the abandoned
    // iteration's update was not applied, so the checkpoint holds the last
    // finished step.
    if (stopping && p.clock->SteadyNow() - stop_started > p.options.stop_timeout) {
      LOG(WARNING) << p.options.name << ": the current iteration did not finish within "
                   << p.options.stop_timeout << " of the stop; abandoning it";
      p.stack.reset();  // waits for a callback in progress, silences later ones
      SS_RETURN_IF_ERROR(p.Checkpoint());
      return absl::OkStatus();
    }
  }
  SS_RETURN_IF_ERROR(p.Checkpoint());
  if (absl::IsCancelled(result)) return absl::OkStatus();
  return result;
}

}  // namespace skipswarm::node
