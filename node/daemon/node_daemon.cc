#include "node/daemon/node_daemon.h"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "common/real_clock.h"
#include "common/status_macros.h"
#include "model/stage_executor.h"
#include "model/sentencepiece_tokenizer.h"
#include "model/tokenizer.h"
#include "node/compute/task_runner.h"
#include "node/compute/timed_stage_compute.h"
#include "node/compute/torch_stage_compute.h"
#include "node/daemon/iteration_report.h"
#include "node/daemon/metrics.h"
#include "node/daemon/planner_factory.h"
#include "node/daemon/swarm_spec_tls.h"
#include "node/stage/stage_server.h"
#include "node/train/data_node_driver.h"
#include "node/train/grpc_group.h"
#include "node/train/node_trainer.h"
#include "node/train/data_source.h"
#include "node/train/route_planner.h"
#include "node/train/sampler_data_source.h"
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
  model::Corpus corpus;
  std::unique_ptr<DataSource> data;
  std::map<int, std::unique_ptr<StageCompute>> computes;
  std::unique_ptr<ThreadTaskRunner> runner;  // joined before the computes go
  std::unique_ptr<StaticSwarmView> view;
  StaticSwarmTls tls;  // the identity outlives the transport and group
  std::unique_ptr<Transport> transport;  // gRPC, shaped when options.wan says so
  std::unique_ptr<GrpcGroupComm> group;
  std::unique_ptr<RouteRepairer> repairer;  // the server borrows it
  std::unique_ptr<StageServer> server;
  std::unique_ptr<RoutePlanner> planner;
  std::unique_ptr<DataNodeDriver> driver;
  std::unique_ptr<NodeTrainer> trainer;
  Metrics metrics;
  std::unique_ptr<MetricsServer> metrics_server;
  int64_t start_iteration = 0;
  absl::Duration run_started;

  std::string CheckpointPath(int stage) const {
    return absl::StrCat(options.model.checkpoint_dir, "/", options.name, "-stage-", stage,
                        ".ckpt");
  }
  absl::Status Checkpoint() {
    if (options.model.checkpoint_dir.empty()) return absl::OkStatus();
    std::error_code ec;
    std::filesystem::create_directories(options.model.checkpoint_dir, ec);
    for (auto& [s, c] : computes) SS_RETURN_IF_ERROR(c->SaveCheckpoint(CheckpointPath(s)));
    LOG(INFO) << options.name << ": checkpointed step " << computes.begin()->second->step()
              << " to " << options.model.checkpoint_dir;
    return absl::OkStatus();
  }
  void OnIteration(const NodeIterationReport& r);
  absl::Status WrapWithShaping();
};

// WAN emulation / operator caps: wraps the gRPC transport (issue 7).
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

absl::StatusOr<std::unique_ptr<NodeDaemon>> NodeDaemon::Create(const NodeDaemonOptions& options) {
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
  p->self = me->info.id;
  p->stages = me->info.stages;
  p->clock = common::RealClock::Create();
  SS_ASSIGN_OR_RETURN(at::Device device, model::ApplyRuntimeOptions(options.model.runtime));
  LOG(INFO) << options.name << " (" << p->self << "): stages " << StagesString(p->stages)
            << ", device " << device << ", seed " << options.model.seed;

  // Compute and, on data nodes, data.
  p->runner = std::make_unique<ThreadTaskRunner>();
  const bool timed = options.wan.timed_forward_s > 0;
  for (int s : p->stages) {
    if (timed) {
      TimedStageCompute::Options o;
      o.stage = s;
      o.forward = absl::Seconds(options.wan.timed_forward_s / options.wan.time_scale);
      o.payload_bytes = options.wan.timed_payload_bytes;
      p->computes[s] = std::make_unique<TimedStageCompute>(p->clock.get(), o);
      continue;
    }
    TorchStageCompute::Options o;
    o.model = options.model.model;
    o.stage = s;
    o.runtime = options.model.runtime;
    o.optimizer = options.model.optimizer;
    o.optimizer.total_steps = options.iterations;
    SS_ASSIGN_OR_RETURN(p->computes[s], TorchStageCompute::Create(o, p->runner.get()));
  }
  const bool data_node = p->computes.count(0) > 0;
  if (data_node && timed) {
    p->data = std::make_unique<SyntheticDataSource>(options.model.samples_per_mb,
                                                    options.model.model.seq_len, 256);
  } else if (data_node) {
    // The tokenizer the model was configured for (--tokenizer), as train-ref.
    SS_ASSIGN_OR_RETURN(std::unique_ptr<model::Tokenizer> tokenizer,
                        model::CreateTokenizer(options.model.tokenizer));
    if (options.model.model.vocab_size < tokenizer->vocab_size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--vocab=", options.model.model.vocab_size, " is smaller than the ",
                       tokenizer->name(), " tokenizer's vocabulary; pass --vocab=",
                       tokenizer->vocab_size()));
    }
    SS_ASSIGN_OR_RETURN(p->corpus, model::LoadCorpus(options.model.corpus, *tokenizer));
    model::SamplerOptions so;
    so.samples_per_mb = options.model.samples_per_mb;
    so.seq_len = options.model.model.seq_len;
    so.seed = options.model.seed;
    SS_ASSIGN_OR_RETURN(p->data, SamplerDataSource::Create(p->corpus.train, so));
  }

  // Resume.
  if (!options.model.checkpoint_dir.empty()) {
    std::vector<int64_t> steps;
    for (auto& [s, c] : p->computes) {
      if (!std::filesystem::exists(p->CheckpointPath(s))) continue;
      SS_ASSIGN_OR_RETURN(int64_t step, c->LoadCheckpoint(p->CheckpointPath(s)));
      steps.push_back(step);
    }
    if (!steps.empty()) {
      if (steps.size() != p->computes.size() ||
          std::adjacent_find(steps.begin(), steps.end(), std::not_equal_to<>()) != steps.end()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "checkpoints in ", options.model.checkpoint_dir, " disagree on the step"));
      }
      p->start_iteration = steps.front();
      LOG(INFO) << options.name << ": resumed at iteration " << p->start_iteration;
    }
  }

  // Network.
  p->view = std::make_unique<StaticSwarmView>(members);
  GrpcTransportOptions to;
  to.self = p->self;
  to.listen_address = options.listen.empty() ? me->info.address : options.listen;
  to.swarm_id = options.swarm_id;
  // Note [Static swarm security]: TLS pinned to the list's node ids, or
  // plain text behind --insecure.
  SS_ASSIGN_OR_RETURN(p->tls, StaticSwarmTls::Create({options.key_file, options.insecure},
                                                     options.swarm, options.name,
                                                     p->clock->Now()));
  LOG(INFO) << options.name << ": "
            << (p->tls.credentials->insecure() ? "plain text (--insecure)"
                                               : "mutual TLS, peers pinned to their --swarm ids");
  to.credentials = p->tls.credentials;
  SS_ASSIGN_OR_RETURN(p->transport, GrpcTransport::Create(to, p->clock.get()));
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
  // The operator's upload cap paces gradient pushes too (0: none).
  go.max_upload_bytes_per_second = options.wan.max_upload_bytes_per_second;
  SS_ASSIGN_OR_RETURN(p->group, GrpcGroupComm::Create(go, p->view.get(), p->clock.get()));

  std::map<int, StageCompute*> stages;
  for (auto& [s, c] : p->computes) stages[s] = c.get();
  StageServerOptions so;
  so.memory_slots = options.memory_slots;
  so.swarm_id = options.swarm_id;
  // Failed hops are re-routed with the scheduler's RerouteInFlight at the
  // planner's costs (DaemonRepairerOptions); a stage may be skipped only
  // when the plan skips stages anyway.
  p->repairer = std::make_unique<SchedulerRouteRepairer>(
      DaemonRepairerOptions(options, p->clock.get()));
  so.repairer = p->repairer.get();
  so.allow_skip =
      options.path_length > 0 && options.path_length < options.model.model.num_stages;
  p->server = std::make_unique<StageServer>(p->transport.get(), p->clock.get(), p->view.get(),
                                            stages, so);
  p->server->Attach();
  if (data_node) {
    std::map<std::string, PeerId> names;
    for (const SwarmMember& m : options.swarm) names[m.name] = m.info.id;
    SS_ASSIGN_OR_RETURN(p->planner, CreateDataNodePlanner(options, names, p->clock.get()));
    DriverOptions d;
    d.mbs_per_iteration = options.mbs_per_iteration;
    d.num_stages = options.model.model.num_stages;
    p->driver = std::make_unique<DataNodeDriver>(p->server.get(), p->clock.get(), p->view.get(),
                                                 p->planner.get(), p->data.get(), d);
    p->server->SetOriginListener(p->driver.get());
  }
  p->trainer = std::make_unique<NodeTrainer>(p->server.get(), stages, p->driver.get(),
                                             p->group.get(), p->clock.get());
  if (options.metrics_port >= 0) {
    SS_ASSIGN_OR_RETURN(p->metrics_server, MetricsServer::Start(&p->metrics, options.metrics_host,
                                                                options.metrics_port));
    LOG(INFO) << options.name << ": /metrics on " << options.metrics_host << ":"
              << p->metrics_server->port();
  }
  return std::unique_ptr<NodeDaemon>(new NodeDaemon(std::move(p)));
}

NodeDaemon::NodeDaemon(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}

NodeDaemon::~NodeDaemon() {
  if (parts_->server) parts_->server->Detach();
}

void NodeDaemon::Parts::OnIteration(const NodeIterationReport& r) {
  const double elapsed = absl::ToDoubleSeconds(clock->SteadyNow() - run_started);
  const std::string line =
      ReportIteration(options.name, r, elapsed, options.progress_file, &metrics);
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  const int64_t done = static_cast<int64_t>(r.iteration) + 1;
  if (options.checkpoint_every > 0 && done % options.checkpoint_every == 0 &&
      done < options.iterations) {
    absl::Status s = Checkpoint();
    if (!s.ok()) LOG(ERROR) << "checkpoint failed: " << s;
  }
}

absl::Status NodeDaemon::Run(const std::atomic<bool>* stop) {
  Parts& p = *parts_;
  if (p.start_iteration >= p.options.iterations) {
    LOG(INFO) << p.options.name << ": already trained " << p.start_iteration << " iterations";
    return absl::OkStatus();
  }
  SS_RETURN_IF_ERROR(p.group->AwaitPeers(p.options.startup_timeout));
  LOG(INFO) << p.options.name << ": all " << p.options.swarm.size()
            << " members answer; training iterations " << p.start_iteration << ".."
            << p.options.iterations - 1;
  p.run_started = p.clock->SteadyNow();
  absl::Notification finished;
  absl::Status result;
  p.trainer->Run(
      p.start_iteration, p.options.iterations - p.start_iteration,
      [&p](const NodeIterationReport& r) { p.OnIteration(r); },
      [&](absl::Status s) {
        result = s;
        finished.Notify();
      });
  bool stopping = false;
  while (!finished.WaitForNotificationWithTimeout(absl::Milliseconds(100))) {
    if (!stopping && stop != nullptr && stop->load()) {
      LOG(INFO) << p.options.name << ": stopping after the current iteration";
      p.trainer->Stop();
      stopping = true;
    }
  }
  SS_RETURN_IF_ERROR(p.Checkpoint());
  if (absl::IsCancelled(result)) return absl::OkStatus();
  return result;
}

}  // namespace skipswarm::node
