// GossipDaemon: `skipswarm node` in a gossip swarm: training peers
// come from membership/ (SWIM over mutual-TLS gRPC) instead of a static
// --swarm list (NodeDaemon, static_swarm/node_daemon.h, which stays for static and WAN
// experiment swarms).
//
//   GossipDaemonOptions o = ...;                       // from flags
//   SS_ASSIGN_OR_RETURN(auto daemon, GossipDaemon::Create(o, TorchNodeBackend()));
//   return daemon->Run(&signals);                      // SIGINT / SIGTERM
//
// Roles:
//  * founder (no --join, or --expect_members=N > 0): hosts --host_stages; once
//    its view holds N live members covering every stage, starts training
//    at iteration 0 (or its checkpoints' iteration).
//  * joiner (--join and no --expect_members): joins a training swarm. With
//    no --host_stages it asks the scheduler's allocation (join_planning.h);
//    picks the next boundary of a live replica (more when iterations are
//    short), announces it, fetches the stage's weights and optimiser state
//    at that boundary (state_transfer.h) and trains from there, micro-
//    batches included (Note [Entry iteration], training_members.h).
//    It logs, and appends to join_report_file, its time to first useful
//    work: process start, bootstrap, placement and model build, announce,
//    wait for the boundary, state transfer, first MB.
// Membership changes (join, dead, left) reach the faces at once; every data
// node plans each iteration from the faces, so the next iteration's plan
// uses the change (a dead member is also dropped from a pending barrier or
// reduce; a joiner enters only at its boundary).
// Rebalancing (rebalance_every > 0): a relay that the balance rule picks
// announces its new stage two or more iterations ahead, fetches that
// stage's state at the switch boundary while it keeps training its old
// stage, and switches there (Note [Stage moves] in training_members.h).
// Leaving (Note [Leaving]): SIGTERM or the Drain RPC (`skipswarm node
// drain`) - refused while this node is the last live replica of a stage
// unless forced; otherwise signs LEFT, finishes the current iteration,
// checkpoints and exits. SIGINT stops the same way without the check
// (the operator stops the whole swarm; `skipswarm local` uses it).
//
// Thread rule: Create and Run on main's thread.
#ifndef SKIPSWARM_NODE_DAEMON_GOSSIP_GOSSIP_DAEMON_H_
#define SKIPSWARM_NODE_DAEMON_GOSSIP_GOSSIP_DAEMON_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "common/peer_quota.h"
#include "node/daemon/gossip/gpu_contention.h"
#include "node/daemon/gossip/swarm_membership.h"
#include "node/daemon/stack/node_backend.h"
#include "node/daemon/stack/node_daemon_options.h"
#include "node/train/node_trainer.h"
#include "node/transport/transport.h"

namespace skipswarm::node {

// What main's signal handlers set (a second signal exits at once, in the
// handler: Note [Stopping] in gossip_daemon.cc).
struct DaemonSignals {
  std::atomic<bool> stop{false};   // SIGINT
  std::atomic<bool> drain{false};  // SIGTERM
  std::atomic<bool> pause{false};   // SIGUSR1 (Note [Paused members])
  std::atomic<bool> resume{false};  // SIGUSR2
};

struct GossipDaemonOptions {
  // name, listen, metrics, slots, mbs, iterations, checkpoints, planner,
  // progress file, startup timeout, model. (`swarm`, `group_listen` and
  // `wan` are not used; `swarm_id` comes from the gossip options.)
  // Note [One port]: base.listen ("HOST:PORT"; empty: 127.0.0.1:0) is the
  // one address every gRPC service of the node serves on.
  NodeDaemonOptions base;
  SwarmMembershipOptions gossip;  // serve_on: set by Create
  // What peers dial (our record's address): "HOST:PORT"; empty: base.listen.
  // Port 0 and an unspecified host are resolved (advertise_address.h).
  std::string advertise;
  std::vector<int> stages;   // empty: a joiner asks the allocation
  // --sdp=auto, for a joiner without `stages`: the allocation chooses
  // between a pipeline stage and a subnetwork of sdp_keep of the stages
  // (trained with forward masking) from the swarm's state (ChooseJoinRole,
  // Note [Join role] in join_role.h); false: a pipeline stage, or what
  // base.sdp says.
  bool choose_role = false;
  double sdp_keep = 0.5;
  int expect_members = 0;    // > 0: a founder waiting for this many
  // A joiner enters at least this many (>= 1) iterations after its
  // source's current one; more when iterations are short (Note [Entry
  // iteration]).
  int entry_lead = 1;
  // Note [Revived members] (behind_check.h): how often a member (a data
  // node too: Note [Data node behind]; one hosting several stages: Note
  // [Behind on any stage] in gossip_daemon_join.cc) asks its stages' live
  // replicas for their iteration, and re-enters (state transfer) when one
  // is more than 4 ahead; zero: never.
  absl::Duration behind_check_every = absl::Seconds(1);
  // Note [Alone after the swarm] (alone_check.h): while training, a view
  // with no live member but us for this long ends the run (exit 0 when
  // another data node left after the last iteration, else a checkpoint and
  // UNAVAILABLE); zero: never.
  absl::Duration alone_timeout = absl::Minutes(2);
  bool force_leave = false;  // SIGTERM leaves even as a stage's last replica
  // Note [Stopping]: a stop (SIGINT, or a SIGTERM that cannot drain: the
  // last replica of a stage) that has not finished its iteration within
  // this abandons it, writes the checkpoint of the last finished step and
  // exits.
  absl::Duration stop_timeout = absl::Seconds(30);
  // Note [Simultaneous leavers] (gossip_daemon_run.cc): a drain or stop
  // that passes the leave check signs record.leaving, waits this long for
  // it to spread (at least twice the time a record takes to reach the
  // other replicas) and checks again. Part of the stop's bound.
  absl::Duration leave_settle = absl::Seconds(1);
  int control_port = -1;     // NodeControl on 127.0.0.1 (-1: off, 0: any)
  // Note [Checkpoint copies] (checkpoint_copies.h): at every checkpoint
  // boundary (base.checkpoint_every) this node holds copies of the stages
  // whose holders it is, up to this many holders per stage; 0: none.
  int checkpoint_copies = 2;
  int keep_copies = 3;       // copies kept per stage (disk and served)
  std::string join_report_file;  // JSON line with a joiner's timings
  // Note [Stage moves]: every this many iterations a one-stage relay
  // checks the balance rule (scheduler's Note [Stage rebalancing]) on its
  // view and moves when it is the node chosen; 0: never.
  int rebalance_every = 0;
  double rebalance_min_gain = 0.2;
  // Outbound-only nodes (node/transport/relay/README.md): how many of them
  // this node relays for at most (0: it relays for nobody), and how many
  // relays this node keeps attached when it is behind NAT itself.
  int relay_slots = 16;
  int relays = 2;
  // For tests: while set and not yet notified, this node, behind NAT,
  // attaches to no relay (its attacher sees no candidates). Borrowed.
  const absl::Notification* relay_attach_gate = nullptr;
  // How long this node, asked to dial a joiner back (Note [Reachability at
  // join]), tries before it calls the joiner unreachable.
  absl::Duration dial_back_timeout = absl::Seconds(3);
  // > 0: publish this as our compute speed instead of the measured one
  // (emulated heterogeneous nodes in tests and experiments).
  double fixed_compute_speed = 0;
  // How long the process had run when the daemon was created (process
  // start, libtorch load, flags), for the joiner's report; 0: unknown.
  absl::Duration process_age_at_start;
  // A joiner's swarm manifest fetch (part of process_age_at_start), for
  // its report.
  absl::Duration manifest_fetch_time;
  // Note [Paused members]: a daily window of local time ("22:00-07:00")
  // in which this node pauses (empty: none), read in `time_zone` (main
  // passes the local one).
  std::string quiet_hours;
  absl::TimeZone time_zone = absl::UTCTimeZone();
  // Note [GPU contention] (gpu_contention.h): while training, pause while
  // another process holds memory on this node's GPU, as this lister sees
  // it (main: nvidia-smi on a CUDA device); null: off.
  std::shared_ptr<GpuProcessLister> gpu_lister;
  GpuContentionOptions gpu_contention;
  // Called after every iteration (trainer thread), for tests and embedders.
  std::function<void(const NodeIterationReport&)> observer;
  // The quota of the manifest service among gossip.extra_services (Note
  // [Peer quotas]), for its refusals on /metrics; null: none. Borrowed.
  const common::PeerQuota* manifest_quota = nullptr;
  // Main's signal flags, installed before Create: Create's waits (the
  // bootstrap, a joiner's stage choice) end with CANCELLED when a stop is
  // asked (Note [Stopping while joining] in gossip_daemon_join.cc); Run's
  // argument takes over from there. Null: none. Borrowed; must outlive
  // the daemon.
  DaemonSignals* signals = nullptr;
  // For tests: wraps this node's pipeline transport (outside any bandwidth
  // caps), so every frame its stage server sends, and every ack it gets,
  // passes through the wrapper: e.g. a hostile member that alters its own
  // frames after signing them (tests/adversarial/forged_frames_test.cc).
  // Null: none.
  std::function<std::unique_ptr<Transport>(std::unique_ptr<Transport>)> wrap_transport;
  // For tests: this node's state server fails the first this many state
  // requests for its stages (StateServerOptions::fail_first_transfers).
  int fail_first_state_transfers = 0;
  // For tests: a joiner calls this with its entry after announcing it and
  // before requesting its state (tests hold the request until the source
  // has passed the entry boundary). Null: none.
  std::function<void(uint64_t entry)> before_state_request;
  // For tests: a member that restored a stage from peers' copies or its
  // own state (Note [Restore from peer copies]) calls this with its entry
  // once it announced it, before training; it may block. Null: none.
  std::function<void(uint64_t entry)> after_stage_restore;
  // For tests: Run calls this on its thread just before the checkpoint it
  // writes when training ends (a stop, a drain, the last iteration), with
  // no lock held; it may block. Null: none.
  std::function<void()> before_final_checkpoint;
  // For tests: a drain or stop calls this once it has signed
  // record.leaving and before it waits leave_settle and checks again (Note
  // [Simultaneous leavers]), with no lock held; it may block. Null: none.
  std::function<void()> before_leave_recheck;
  // For tests: the same, once its first leave check passed and before it
  // signs record.leaving (a stop's check runs on Run's thread up to 100 ms
  // after the signal, so a test that races two stops holds both here).
  std::function<void()> before_leave_intent;
};

class GossipDaemon {
 public:
  // `backend` builds the computes and the data (node_backend.h; the
  // binary passes TorchNodeBackend()); kept for stage moves. Its computes
  // must export and import their state (joiners and moves fetch it).
  static absl::StatusOr<std::unique_ptr<GossipDaemon>> Create(const GossipDaemonOptions& options,
                                                              NodeBackend backend);
  ~GossipDaemon();

  absl::Status Run(DaemonSignals* signals);
  // Drain request (the control RPC; SIGTERM uses the same path): OK when
  // the node will leave after its current iteration.
  absl::Status RequestDrain(bool force);
  // A volunteer's pause (true) or resume (false) (the control RPC and
  // SIGUSR1 / SIGUSR2; Note [Paused members] in training_members.h): OK
  // when our record and server say so now. FailedPrecondition, changing
  // nothing, for a data node, a node not training yet, or (without
  // `force`) the last unpaused live replica of a stage. Thread-safe.
  absl::Status RequestPause(bool paused, bool force);
  bool paused() const;
  // Our advertised "host:port" (what others --join; every service).
  std::string gossip_address() const;
  // The port of /metrics and the status page (-1: off).
  int metrics_port() const;
  // This node's membership view (records with their measured speeds, link
  // stats; Note [Measured speeds] in speed_reports.h). Thread-safe.
  membership::View view() const;

  struct Parts;

 private:
  explicit GossipDaemon(std::unique_ptr<Parts> parts);
  std::unique_ptr<Parts> parts_;
};

// `skipswarm node drain`: asks the node whose control port is `address`
// to drain; the node's answer (or refusal) as a Status.
absl::StatusOr<std::string> SendDrain(const std::string& address, bool force);
// `skipswarm node pause|resume`: the same for a pause (resume = false) or
// a resume.
absl::StatusOr<std::string> SendPause(const std::string& address, bool resume, bool force);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_GOSSIP_GOSSIP_DAEMON_H_
