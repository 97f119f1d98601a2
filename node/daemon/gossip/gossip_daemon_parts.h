// GossipDaemon's parts (private to gossip_daemon*.cc): what one daemon
// owns, in destruction order, and the steps Create/Run are made of. The
// joiner's entry and its time-to-first-useful-work report live in
// gossip_daemon_join.cc, stage moves in gossip_daemon_move.cc, and the
// set-up steps (computes, serving and training stack, the founders' wait,
// the reachability check) in gossip_daemon_setup.cc.
//
// Thread rule: as GossipDaemon (main's thread) except where a member says
// otherwise; `mu` guards the fields marked with it.
#ifndef SKIPSWARM_NODE_DAEMON_GOSSIP_GOSSIP_DAEMON_PARTS_H_
#define SKIPSWARM_NODE_DAEMON_GOSSIP_GOSSIP_DAEMON_PARTS_H_

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/real_clock.h"
#include "common/status_macros.h"
#include "node/compute/task_runner.h"
#include "node/daemon/gossip/alone_check.h"
#include "node/daemon/gossip/behind_check.h"
#include "node/daemon/gossip/checkpoint_copies.h"
#include "node/daemon/gossip/control.grpc.pb.h"
#include "node/daemon/gossip/evidence_adopter.h"
#include "node/daemon/gossip/evidence_service.h"
#include "node/daemon/gossip/first_work_probe.h"
#include "node/daemon/gossip/gossip_daemon.h"
#include "node/daemon/gossip/hosted_stages.h"
#include "node/daemon/gossip/reachability.h"
#include "node/daemon/gossip/state_transfer.h"
#include "node/daemon/gossip/swarm_membership.h"
#include "node/daemon/gossip/newcomer_ledger.h"
#include "node/daemon/gossip/training_members.h"
#include "node/daemon/gossip/volunteer_pause.h"
#include "node/daemon/reporting/daemon_quotas.h"
#include "node/daemon/reporting/metrics.h"
#include "node/daemon/reporting/pause_meter.h"
#include "node/daemon/reporting/serving_health.h"
#include "node/daemon/reporting/speed_reports.h"
#include "node/daemon/reporting/status_board.h"
#include "node/daemon/stack/stage_checkpoints.h"
#include "node/daemon/stack/node_backend.h"
#include "node/daemon/stack/training_stack.h"
#include "node/stage/evidence_bans.h"
#include "node/stage/route_repair.h"
#include "node/stage/verify_trust.h"
#include "node/train/grpc_group.h"
#include "node/transport/grpc_transport.h"
#include "node/transport/node_server.h"
#include "node/transport/relay/relay_client.h"
#include "node/transport/relay/relay_service.h"
#include "node/transport/shaping_transport.h"

namespace skipswarm::node {

// Note [Stopping while joining] (gossip_daemon_join.cc): what a join that
// a stop signal ended returns; Run then exits without a checkpoint.
inline absl::Status JoinStopped(const std::string& while_doing) {
  return absl::CancelledError(
      absl::StrCat("stopped by a signal ", while_doing, " (joining: nothing trained yet)"));
}

// A joiner's milestones (steady clock), for its time-to-first-useful-work.
struct JoinTimeline {
  absl::Duration process_age;  // exec -> daemon start (0: unknown)
  absl::Duration start, bootstrapped, placed, announced, first_chunk, state_loaded, first_step,
      first_forward, first_backward;
  int entry_attempts = 0;
  uint64_t entry = 0;
  size_t state_bytes = 0;
  int streams = 0;
  int sources_tried = 0;
  std::string source;
  uint64_t digest_after_first_step = 0;
  int digests_checked = -1;  // -1: not yet; 1: agreed at the next reduce; 0: disagreed
  bool reported = false;
};

// Declaration order is destruction order reversed, the computes last;
// ~GossipDaemon first takes down the stack (waiting out the trainer's
// callback, which uses the gossip side), then a move's worker, then the
// gossip side (Note [Gossip daemon teardown] in gossip_daemon.cc).
struct GossipDaemon::Parts {
  GossipDaemonOptions options;
  std::unique_ptr<common::RealClock> clock;
  common::NodeId self;
  // What this node hosts, and the stage a pending move goes to: written by
  // main's thread (Create, SwitchStage) and StepMove, read by every thread
  // as one snapshot (Note [Hosted stages snapshot] in hosted_stages.h).
  HostedStages hosted;
  std::vector<int> Stages() const { return hosted.Get().stages; }
  bool joiner = false;
  std::unique_ptr<TrainingMembers> members;
  // Note [Newcomer probation]: whom our record vouches for; null when the
  // swarm has no probation.
  std::unique_ptr<NewcomerLedger> newcomers;
  // Note [Verify trust] (node/stage/verify_trust.h): this node's verdicts
  // on the replicas its checks judged, and the routing face without the
  // ones condemned, which every training stack routes by (kept across
  // stage moves; the stacks borrow both). Set in Create.
  std::unique_ptr<VerifyTrust> verify_trust;
  // Note [Evidence bans] (node/stage/evidence_bans.h): the bans this node
  // adopted on evidence it checked; `routing` and the replica group read
  // them through VerifyQuorumBans. Set in Create, before `routing`.
  std::unique_ptr<EvidenceBans> evidence_bans;
  std::unique_ptr<VerifiedRoutingView> routing;
  // Fetches and checks the evidence behind bans the quorum did not adopt
  // (its worker borrows `members` and `evidence_bans`, declared before it);
  // null without probation or without a judge (gossip_daemon_evidence.cc).
  std::unique_ptr<EvidenceAdopter> evidence_adopter;
  void VouchFor(const NodeIterationReport& r);
  // Note [Gossiped bans] (node/train/gossiped_bans.h): the bans this node
  // reached on its own evidence, in our record; re-signed when they change.
  std::vector<common::NodeId> published_bans;
  void PublishBans();
  // Note [Peer quotas]: the per-peer budgets of the pipeline, group and
  // state services; `quotas.members` follows gossip's live records.
  DaemonQuotas quotas;
  NodeBackend backend;  // builds `computes`, `frozen` and `data` (again on a stage move)
  std::unique_ptr<DataSource> data;  // data nodes only
  // Held while SnapshotInIteration reads `computes` off the main thread and
  // while a stage move changes the map (SwitchStage); declared first, so it
  // outlives every server that calls SnapshotInIteration.
  absl::Mutex computes_mu;
  std::map<int, std::unique_ptr<StageCompute>> computes;
  // SDP backward masking's frozen copies (Note [SDP frozen stages]).
  std::map<int, std::unique_ptr<StageCompute>> frozen;
  // The computes' threads report into these through `probes` (first work,
  // measured speed) until `runner` is joined: declared before both, so
  // they go after them.
  absl::Mutex mu;
  JoinTimeline timeline ABSL_GUARDED_BY(mu);
  std::unique_ptr<ComputeSpeedMeter> speed;
  std::map<int, std::unique_ptr<FirstWorkProbe>> probes;
  std::unique_ptr<ThreadTaskRunner> runner;  // joined before the computes go
  std::shared_ptr<const identity::PeerCredentials> credentials;  // every node service
  // Note [One port]: the server every service below registers on. ~Parts
  // shuts it down first (~GossipDaemon did already, before `gossip`) and
  // frees it after the services: gRPC's Wait returns once every reactor's
  // OnDone ran, but orders that through an atomic inside libgrpc++ that
  // TSan cannot see; the transport's destructor waits for its stream
  // reactors' OnDone under its own lock, so their last calls into the
  // server (a Finish) are seen to come before the free.
  std::unique_ptr<NodeServer> server;
  ~Parts() {
    if (server) server->Shutdown(absl::ZeroDuration());
  }
  // Borrows `transport` (declared after it, so it goes after it too).
  std::unique_ptr<LinkTimingTransport> timed_transport;
  // The pipeline transport: `grpc`, wrapped in a ShapingTransport when the
  // operator caps this node's bandwidth (--max_upload_mbps / --max_download_mbps).
  std::unique_ptr<Transport> transport;
  GrpcTransport* grpc = nullptr;  // inside `transport`
  std::unique_ptr<GrpcGroupComm> group;
  std::unique_ptr<StateServer> state;
  // Note [Checkpoint copies]: this node's copies of other stages (disk),
  // and the worker that pulls them; the copier goes before `state` and
  // `copy_store`, after the stack that feeds it.
  std::unique_ptr<CopyStore> copy_store;
  std::unique_ptr<CheckpointCopier> copier;
  // Every stack borrows it; kept across stage moves (BuildServing).
  std::unique_ptr<RouteRepairer> repairer;
  // Server, planner, driver and trainer over `probes`; rebuilt by a stage
  // move (SwitchStage) and a re-entry. Note [Stack hand-over]: only the Run
  // thread replaces it, always through ReplaceStack (under `stack_mu`), so
  // its own reads need no lock; the control service's thread (pause,
  // drain) uses it only under `stack_mu`.
  std::unique_ptr<TrainingStack> stack;
  absl::Mutex stack_mu;
  // Swaps in `next` under `stack_mu` and destroys the old stack after the
  // lock is released (its destructor waits out a trainer callback). With
  // no `next` the old stack is retired (RetireStack: its held micro-batch
  // visits are released and their origins told); a non-null `next` is only
  // for a daemon with no stack (callers drop the old one first).
  void ReplaceStack(std::unique_ptr<TrainingStack> next);
  Metrics metrics;
  std::unique_ptr<ServingHealth> health;
  std::unique_ptr<PauseMeter> pauses;  // skipswarm_training_paused* on /metrics  // the gRPC health status, with reasons
  // The live status page's data (status_page.h); fed by gossip's listener,
  // the trainer's callback and the set-up steps; read by metrics_server.
  std::unique_ptr<StatusBoard> status;
  std::unique_ptr<MetricsServer> metrics_server;
  std::unique_ptr<grpc::Server> control;
  std::unique_ptr<proto::NodeControl::Service> control_service;
  std::unique_ptr<SwarmMembership> gossip;
  // Note [Reachability at join] (gossip_daemon_setup.cc).
  ReachabilityOptions reachability_options;
  std::unique_ptr<ReachabilityService> reachability;
  std::unique_ptr<EvidenceService> evidence_service;  // on `server`
  std::string advertised;  // our record's address
  // Note [Advertise auto]: the port to pair with the host peers observe;
  // 0: not auto (the address is what --advertise / --listen say).
  int advertise_auto_port = 0;
  bool reachability_checked = false;
  bool behind_nat = false;  // the check's verdict
  // Note [Relayed members] (gossip_daemon_relay.cc): the relay we are for
  // outbound-only members (registered on `server`, which ~Parts stops first),
  // how we dial them, and our own relays when we are behind NAT.
  std::unique_ptr<RelayService> relay_service;
  std::unique_ptr<RelayDialer> relay_dialer;
  std::unique_ptr<RelayAttacher> relay_attacher;
  int64_t start_iteration = 0;
  // Note [Restart behind the swarm]: each live replica's iteration when
  // SwarmTrainsWithoutUs last asked it (Run's thread only).
  std::map<common::NodeId, uint64_t> behind_probe;
  absl::Duration run_started;
  // A joiner's first look at its source's iteration (for its pace).
  std::optional<uint64_t> source_first_iteration;
  absl::Duration source_first_asked;

  // The membership while it lives, for callbacks on other threads: hop
  // timings go there (Note [Measured speeds] in speed_reports.h) and the
  // replica group's push retries look members up there (Note [Retried
  // pushes]). ~GossipDaemon clears it before `gossip` goes; a reader holds
  // `link_mu` while it uses the pointer. (Reading `gossip` itself from
  // those threads raced with its reset.)
  absl::Mutex link_mu;
  membership::Membership* live_membership ABSL_GUARDED_BY(link_mu) = nullptr;

  // Note [Stage moves] (training_members.h): a move this node announced.
  // Started on the trainer thread (StepMove), switched on main's (Run).
  struct PendingMove {
    int from = -1;
    int to = -1;
    uint64_t at = 0;              // the switch boundary (entry in `to`)
    bool stop_requested = false;  // the trainer stops after at - 1
    absl::Notification fetched;   // `state` is final
    absl::StatusOr<FetchedState> state = absl::UnknownError("not fetched");
    std::thread worker;           // announces, then fetches `to` at `at`
  };

  std::unique_ptr<PendingMove> move ABSL_GUARDED_BY(mu);
  bool draining ABSL_GUARDED_BY(mu) = false;
  absl::Duration drain_started ABSL_GUARDED_BY(mu);
  // Note [Paused members] (gossip_daemon_pause.cc): the volunteer's policy
  // (operator requests, quiet hours), whether our record and server say
  // paused now, and the last refusal logged.
  VolunteerPause volunteer ABSL_GUARDED_BY(mu){std::nullopt, absl::UTCTimeZone()};
  bool volunteer_paused ABSL_GUARDED_BY(mu) = false;
  std::string volunteer_refused ABSL_GUARDED_BY(mu);
  absl::Mutex pause_mu;  // serialises ApplyPause (record edits in order)
  // Note [GPU contention]: started by Run when training starts (our own
  // context is on the GPU by then); null when off. Its verdict reaches
  // `volunteer` in PollVolunteerPause.
  std::unique_ptr<GpuContentionWatch> gpu_watch;
  bool gpu_check_failing ABSL_GUARDED_BY(mu) = false;  // the last poll's, for events

  const NodeDaemonOptions& base() const { return options.base; }
  absl::Status Checkpoint() {
    return SaveStageCheckpoints(base(), BorrowComputes(computes));
  }
  std::string ScratchPath(int stage, const std::string& what) const {
    return (std::filesystem::temp_directory_path() /
            absl::StrCat("skipswarm-", self.ShortString(), "-", what, "-stage-", stage))
        .string();
  }
  absl::StatusOr<StageSnapshot> Snapshot(int stage);
  // Note [Snapshot in the iteration] (state_transfer.h), on a gRPC thread:
  // `stage`'s state while its step is still `boundary` (FAILED_PRECONDITION
  // once the iteration's update ran).
  absl::StatusOr<StageSnapshot> SnapshotInIteration(int stage, uint64_t boundary);
  std::map<int, uint64_t> Digests() {
    std::map<int, uint64_t> d;
    for (auto& [s, c] : computes) d[s] = c->ParamsDigest();
    return d;
  }
  absl::Status CanLeave(bool force);
  // Note [Simultaneous leavers] (gossip_daemon_run.cc): CanLeave, then
  // record.leaving signed, leave_settle waited out and CanLeave again. OK:
  // this node may sign LEFT at once (record.leaving stays). Otherwise
  // CanLeave's FailedPrecondition with record.leaving cleared: it is (now)
  // a stage's last replica that stays. Blocks for leave_settle; no lock held.
  absl::Status DecideLeave(bool force);
  // Signs record.leaving and record.stopping (Note [Simultaneous leavers])
  // with stop_after, the last iteration it trains when stopping (Note
  // [Stopping last replica] in training_members.h).
  void SignLeaving(bool leaving, bool stopping, uint64_t stop_after = 0);
  // Note [Stopping]: a stage of the model that no live member (this one
  // included) hosts in the current iteration, so the data nodes cannot plan
  // and training is paused; nullopt when every stage has a live replica.
  std::optional<int> StageWithoutLiveReplica();
  // Saves the hosted stages and prints "NAME: checkpoint of step N written
  // to DIR" (the stop's last word; the periodic checkpoints stay quiet).
  absl::Status FinalCheckpoint();
  // Note [Paused members]: CheckPause over one snapshot of `hosted` (Note
  // [Hosted stages snapshot]); any thread.
  absl::Status CanPause(bool force);
  // Pauses or resumes our server and record (no-op when already so).
  absl::Status ApplyPause(bool paused, const std::string& why, bool force);
  // Main's thread, every Run tick: applies what the policy wants now.
  void PollVolunteerPause();
  absl::Status BuildTraining();
  absl::Status AddCompute(int stage);
  absl::Status BuildServing();
  // `health` (gRPC health, metrics, the status page's events); once the
  // server started, before gossip's listener can use it.
  void MakeHealth();
  // Trainer thread, after iteration `done`'s update: checks the balance
  // rule every rebalance_every iterations and starts a move, and asks the
  // trainer to stop before a pending move's switch.
  void StepMove(uint64_t done);
  // Main thread, the trainer stopped at the switch: swaps the old stage's
  // compute, server and trainer for the new stage's, with the fetched state.
  absl::Status SwitchStage();
  // CANCELLED when `signals` asks to stop while waiting; ABORTED when the
  // swarm trains without us (Note [Restart behind the swarm]: our record
  // names no stage again, and Run enters as a joiner).
  absl::Status WaitForFounders();
  // Run's (Create's: options.signals); null in embedders without signals.
  DaemonSignals* signals = nullptr;
  // A stop (SIGINT) or drain (SIGTERM) was asked. Any thread.
  bool StopRequested() const {
    return signals != nullptr && (signals->stop.load() || signals->drain.load());
  }
  // Whether a wait before training (the stage choice, the wait for our
  // relays or a state source, the fetch and the pauses between its tries)
  // must end now, and with what: JoinStopped(while_doing) on a stop signal
  // (Note [Stopping while joining]), our revocation's cause once our
  // membership learnt it (Note [Revoked while joining]); OK to go on.
  absl::Status JoinWaitEnds(const std::string& while_doing) const;
  // A joiner without options.stages (Create's thread): the stage the
  // allocation gives it (ChooseJoinStage) or, with options.choose_role,
  // its role and stages (ChooseJoinRole; a subnetwork sets base().sdp to
  // forward masking); retried while the swarm forms, until the start-up
  // deadline. CANCELLED on a stop signal; our revocation's cause
  // (Membership::SelfAdmission) once we learn it.
  absl::StatusOr<std::vector<int>> PlaceJoiner();
  absl::Status EnterAsJoiner();
  // Note [Restart behind the swarm] (gossip_daemon_join.cc), Run's thread
  // before and during the founders' wait: whether a live replica of any of
  // our stages trains without us: more than the stage server's lead past
  // the iteration our checkpoint resumed us at, or past it and further on
  // than when this asked before (behind_probe). Then we enter as a joiner.
  // With a stage of ours without a live replica (the swarm paused for it),
  // any live replica of another past our start. False when no stage of
  // ours has a live replica, and for a subnetwork.
  bool SwarmTrainsWithoutUs();
  // Note [Behind on any stage] (gossip_daemon_join.cc): asks the live
  // replicas of each of `stages` in `view` (StateSources: this member left
  // out; a peer hosting several of them once, for the first) with `query`,
  // stage by stage, handing each answer to `seen` until it returns true;
  // whether it did. A stage with no live replica is skipped and added to
  // `orphaned` (when given); nobody is asked when none has one.
  using IterationQuery = std::function<absl::StatusOr<uint64_t>(const StateSource&)>;
  using StageAnswerSeen =
      std::function<bool(int stage, const StateSource&, const absl::StatusOr<uint64_t>&)>;
  bool AskEachStagesReplicas(const membership::View& view, const std::vector<int>& stages,
                             const IterationQuery& query, const StageAnswerSeen& seen,
                             std::vector<int>* orphaned = nullptr) const;
  // One round of EnterAsJoiner (Note [Join retries]): announces an entry
  // `*lead` iterations after `current` (later ones while the sources have
  // passed it, raising `*lead`), fetches the state from `sources` and loads
  // it. OUT_OF_RANGE: nothing left to join; CANCELLED: a stop signal;
  // other errors: this round failed.
  // With more than one stage (a subnetwork) every stage's state is fetched
  // at the same boundary (Note [A subnetwork joins]); `sources` are the
  // first stage's.
  absl::Status TryEntry(const std::vector<int>& stages, uint64_t current, int* lead,
                        const std::vector<StateSource>& sources, FetchOptions fo);
  // Note [Restore from peer copies] (gossip_daemon_restore.cc): true once
  // every stage of ours without a live replica (`orphaned`, a subset of
  // Stages()) is restored from the newest state of it, a live peer's copy
  // or our own (Note [Newest state wins] in orphan_restore.h), every other
  // one fetched from its live replicas at the same boundary, and all
  // entered at once; false when nobody holds a state of one of `orphaned`
  // (`missing` names it).
  absl::StatusOr<bool> EnterFromPeerCopies(const std::vector<int>& orphaned, int* missing);
  // Note [Revived members] (behind_check.h), main thread: the iteration a
  // live replica of our stage is in when it is more than the lead ahead
  // of ours, or the data nodes' when our whole stage is (Note [Sole
  // replica behind]) (a one-stage member, a data node too: Note [Data node
  // behind]; a member hosting several stages: a live replica of any of
  // them, Note [Behind on any stage]; not moving, not stopping; at most
  // once per options.behind_check_every).
  std::optional<BehindVerdict> SwarmAheadOfUs();
  // Note [Alone after the swarm] (alone_check.h), main thread: a verdict
  // once our view has held no live peer for options.alone_timeout while
  // we train (not stopping; zero timeout: never).
  std::optional<AloneVerdict> AloneAfterSwarm();
  // ...then the run ends: OK without a checkpoint (kSwarmFinished), or
  // UNAVAILABLE after the checkpoint of the last finished step (kAlone).
  absl::Status EndAlone(const AloneVerdict& verdict);
  // ...then Reenter or MoveAhead.
  absl::Status CatchUp(const BehindVerdict& verdict);
  // Out of training, the stuck iteration dropped, and in again like a
  // joiner with a live replica's state.
  absl::Status Reenter(uint64_t swarm_at);
  // Note [Sole replica behind]: the stuck iteration dropped, our own state
  // advanced to `data_at` without updates; Run trains on from there.
  // OUT_OF_RANGE (after a checkpoint) when `data_at` is past the run.
  absl::Status MoveAhead(uint64_t data_at);
  std::unique_ptr<BehindCheck> behind;
  // Note [Health channels] (state_transfer.h): the behind check's queries,
  // main thread.
  HealthChannels health_channels;
  // Note [Alone after the swarm], main thread (made on first use).
  std::unique_ptr<AloneCheck> alone;
  void OnIteration(const NodeIterationReport& r);
  // Note [Checkpoint copies]: creates the store and copier, serving the
  // copies a previous run kept.
  absl::Status StartCopies();
  // Trainer thread, at boundary `next`: publishes our stages' state when
  // `next` is a checkpoint boundary (before the StateServer's OnBoundary)...
  void PublishCheckpoint(uint64_t next);
  // ...and asks the copier for the stages whose holder we are (after it).
  void RequestCopies(uint64_t next);
  void OnMemberChange(const membership::MemberChange& c);
  void ReportJoin();
  absl::Status StartControl();
  // True once a check had an answer.
  bool CheckReachabilityOnce();
  // Create's bootstrap (SwarmMembership::Join) and first reachability
  // check; a joiner's record is outbound_only until that check clears it
  // (Note [Unverified joiners] in gossip_daemon_setup.cc).
  absl::Status JoinAndCheckReachability();
  // Note [Advertise auto]: settles `advertised`; returns its check.
  ReachabilityReport SettleAdvertiseAuto(const std::vector<std::string>& peers);
  // Note [Relayed members]: the gossip view with every relayed member's
  // addresses replaced by its RelayDialer endpoint (what this node dials).
  membership::View RoutedView() const;
  // Registers the relay service and makes the dialer (Create, before the
  // server starts).
  void SetUpRelaying(grpc::ServerBuilder* builder, const std::string& swarm_id);
  // Note [Evidence bans] (gossip_daemon_evidence.cc): serves our kept
  // evidence on `builder` (`evidence_service`) and starts the adopter;
  // ConsiderEvidence queues fetches for the bans in the current view (at
  // each boundary), ExportEvidenceMetrics reports both sides.
  void SetUpEvidence(grpc::ServerBuilder* builder, const std::string& swarm_id);
  void ConsiderEvidence();
  void ExportEvidenceMetrics();
  // Behind NAT: attach to relays and name them in our record.
  void StartRelayAttacher();
  // Note [Relayed entry] (gossip_daemon_relay.cc): returns once our record
  // names a relay (at once when it is not outbound-only); DEADLINE_EXCEEDED
  // at `deadline` (steady clock); CANCELLED on a stop signal; our
  // revocation's cause (Membership::SelfAdmission) once we learn it.
  absl::Status AwaitOwnRelays(absl::Duration deadline);
};


}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_GOSSIP_GOSSIP_DAEMON_PARTS_H_
