// GrpcGroupComm: GroupComm between daemons over StageService (proto/
// stage.proto), served on its own port next to the pipeline transport.
//
//   GrpcGroupOptions o{.self = me, .listen_address = "0.0.0.0:7421"};
//   SS_ASSIGN_OR_RETURN(auto group, GrpcGroupComm::Create(o, &view, clock));
//   SS_RETURN_IF_ERROR(group->AwaitPeers(absl::Seconds(60)));   // startup
//   group->AllReduce(it, stage, contribution, done);
//
// Note [Gradient exchange]: a chunked reduce-scatter + all-gather among the
// stage's live replicas (ShardedReduce, sharded_reduce.h). The flat float32
// gradient is cut into one shard per replica; each replica pushes shard k
// of its own sum (with its visits and parameter digest) to the replica that
// owns shard k, which adds the parts in ascending node-id order and pushes
// the reduced shard (with the round's visits and every member's digest) to
// all the others; every push goes in <= 1 MiB GradientChunks on
// StageService.PushGradients. Each replica thus sends 2 (R-1)/R of the
// gradient instead of the copies of all-to-all, and every replica
// ends with the same bytes (the same additions as summing whole
// contributions in id order). A replica that dies mid-way (failed push,
// view verdict, or silent to the probes of Note [Group liveness]) makes
// the survivors redo the round without it from their kept contributions,
// so the result is the survivors' sum over the survivors' visits (the
// weights re-normalised). A survivor that had already finished the old
// round answers a peer redoing it, but keeps its own result: the two then
// step differently, which the next reduce's digest check reports and
// NodeTrainer repairs (Note [Digest re-sync], node_trainer.h). Finished
// rounds are kept GrpcGroupOptions::keep_iterations for that, and a replica that finished
// redoes a smaller round its peers restarted (ShardedReduce::
// SmallerRoundWaiting), so no survivor waits forever.
//
// Bytes on the wire per replica per reduce: 2 (R-1)/R x the gradient
// (checked in sharded_reduce_test; measured figures: node/train/README.md).
// Shards are sized by the members' uplink figures (Note [Shard layout] in
// sharded_reduce.h): each member puts its figure in its reduce-scatter
// pushes, every member gets all of them back with the reduced shards, and
// the stage's next round is cut in proportion to them (equal shards while
// any member's is unknown, and whenever members disagree on the cut).
// Note [Uplink figure]: a member's figure is, unless
// GrpcGroupOptions::uplink_bytes_per_second supplies one, measured from its
// own reduce pushes: gradient bytes pushed / the time at least one push was
// in flight (pushes to different peers overlap on one uplink), smoothed
// over rounds (half old, half new). Like the pipeline's hop throughput
// (node/daemon/reporting/speed_reports.h) it is a lower bound: a push ends at the
// receiver's ack. What sized shards gain (sharded_reduce_test TimedRound*
// on the simulated clock, group_benchmark BM_GrpcAllReduceShaped over
// gRPC): node/train/README.md.
//
// Note [Barrier message]: the iteration barrier rides the same RPC: a data
// node that finished iteration i pushes one empty GradientChunk with
// stage = kBarrierStage to every member; a node passes the barrier once
// every live data node's message (or its own) is in.
//
// Note [Entering members]: a member whose record says it is entering its
// stages (PeerInfo::entering: a joiner or mover that announced its entry
// and has not loaded its state yet, Note [Entry iteration] in
// node/daemon/gossip/training_members.h) is listed in its replicas' rounds
// from its entry, but its part is zeros with no visits, sent only once its
// state is loaded. A round does not wait for that part: the sweep closes
// such a member out once its part is still missing entering_grace after
// this replica's AllReduce (Note [Late members] in sharded_reduce.h),
// without marking it dead; the survivors average without
// it, which is the same sum, and send it their reduced shards, which its
// own round, once its state is loaded, takes as its (late) result: the
// same step, so its digest still equals theirs. Waiting for it tied the
// replicas' averaging to the joiner's state fetch, which waits for a
// source's boundary: a joiner slow to ask (a loaded machine, a held
// request) held its replicas in the averaging of its entry until the
// silent deadline dropped it, the sources passed the entry meanwhile, the
// joiner announced a later entry and the replicas waited again; the
// micro-batches held at them meanwhile ran to their deadlines at the data
// nodes, each wait widening the next one (Note [MB deadline] in
// data_node_driver.h). A member that loaded its state re-signs without the
// flag; a peer whose view still says entering may close it out of a round
// it would have joined: it then takes the late result, as above.
//
// Note [Group bans]: the verdicts of Note [Robust averaging] are counted
// per sender: a round in which this node (as a shard owner) left out a
// sender's part as non-finite or pulled it in as an outlier is one offence
// (clipping by norm is not: honest spikes meet that bound); at ban_after
// offences in consecutive rounds of a stage, or a decayed count of its
// offences reaching ban_after + 0.5 (Note [Offences in a row] in offence_tally.h:
// an honest replica's outliers are single rounds, a liar's every round or a
// steady share of them) the sender is banned for
// good, with the reason logged. From the next round this node starts, the
// banned sender's parts in the shards it owns are left out whatever they
// hold (RobustOptions::banned: its share becomes the others' mean, named
// kBanned each round, so skipswarm_gradient_parts_refused_total
// {reason="banned"} keeps counting). It is not cut out of the round: it
// still gets the reduced shards and so keeps the group's weights, and the
// micro-batches routed through it (the data nodes do not know of the ban)
// stay right; cut out, a liar that steps on its own lie would serve them
// with weights of its own. Routing around a banned node needs the ban
// gossiped and agreed by its stage's other replicas (not done). The ban
// is this node's own; the daemon's record publishes it (NodeRecord.bans),
// and a member that did not reach it adopts it, for averaging only, when a
// quorum of the accused's live peers publish it (Note [Gossiped bans] in
// gossiped_bans.h): so a data node, whose data stage is not judged across
// subnetworks, still leaves out a lone SDP liar its peers caught. Each
// node judges on its own too: every honest shard owner sees a consistent liar's
// parts, so its peers reach the same verdict in the same round or soon
// after; shards are reduced by their owners, so replicas that disagree
// still end with the same bytes. A banned member's own shard is reduced
// by each member that bans it, from the others' parts, and the banned
// member's reduced shard is never taken (Note [Banned owners] in
// sharded_reduce.h). Not covered: a shard owner not (yet) banned that lies
// about its reduced shard within range (only non-finite reduced shards
// are refused).
//
// Thread rule: thread-safe; `done` callbacks run on the clock's timer
// thread with no lock held. The view and clock must outlive it.
#ifndef SKIPSWARM_NODE_TRAIN_GRPC_GROUP_H_
#define SKIPSWARM_NODE_TRAIN_GRPC_GROUP_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/peer_quota.h"
#include "identity/tls_credentials.h"
#include "model/averaging_options.h"
#include "node/stage/swarm_view.h"
#include "node/train/gossiped_bans.h"
#include "node/train/group_comm.h"
#include "node/train/silent_deadline.h"

namespace grpc {
class ResourceQuota;
class ServerBuilder;
}  // namespace grpc

namespace skipswarm::node {

inline constexpr uint32_t kBarrierStage = 0x7fffffff;

struct GrpcGroupOptions {
  common::NodeId self;
  std::string listen_address = "127.0.0.1:0";
  // Set: the service registers on this builder (the daemon's one server,
  // node/transport/node_server.h) instead of starting its own;
  // listen_address is ignored, port() is 0, and the server's owner shuts it
  // down before destroying this group.
  grpc::ServerBuilder* serve_on = nullptr;
  // Without serve_on: the quota its own server allocates from (Note [gRPC
  // memory quota] in node/transport/node_server.h); null: none.
  std::shared_ptr<grpc::ResourceQuota> resource_quota;
  std::string swarm_id;
  absl::Duration push_deadline = absl::Seconds(60);
  // How often pending barriers / reduces re-check the view for deaths.
  absl::Duration recheck = absl::Milliseconds(50);
  // Liveness of awaited members (Note [Group liveness] in grpc_group_sweep.cc).
  absl::Duration probe_interval = absl::Seconds(1);
  absl::Duration probe_timeout = absl::Seconds(1);
  // Consecutive failed probes before the member is marked dead: one slow
  // answer on a loaded machine is not a death (StaticSwarmView verdicts are
  // final; a false one cost a live data node its MBs every iteration).
  int probe_failures = 3;
  // Note [Silent members] (grpc_group_sweep.cc): how long a barrier or reduce
  // waits for a member that answers probes but sends nothing
  // (silent_deadline.h).
  SilentDeadlineOptions silent;
  // Note [Entering members]: how long a round waits for a member still
  // loading its state before closing it out (one that loads at once, the
  // usual join, then still averages its entry in the round).
  absl::Duration entering_grace = absl::Seconds(1);
  // Note [Stated bounds in the daemons] (grpc_group_sweep.cc): the largest
  // bound a data node's barrier message may state (a larger one counts as
  // this). Default: the data nodes' start-up MB deadline (120 s) x (4
  // waves + 1); the daemons set MaxHonestIterationBound (silent_deadline.h)
  // of their driver options (TrainingStack::MaxStatedBound).
  absl::Duration max_stated_bound = absl::Minutes(10);
  // Note [Stated pace] (silent_deadline.h): below that cap, what a data
  // node's recent pace lets a statement count. Default: the data nodes'
  // default driver options; the daemons set StatedPaceFor their own
  // (TrainingStack::StatedPace).
  StatedPaceOptions stated_pace;
  // Refuse pushes and state requests from senders the view does not list
  // (PERMISSION_DENIED): a static --swarm list is the whole swarm. With TLS
  // the sender is its certificate's key; plain text only trusts its word.
  bool members_only = false;
  // This member's uplink figure in bytes/s (0 = unknown) for the shard
  // layout, read at each AllReduce; unset: measured from this member's own
  // gradient pushes (Note [Uplink figure]).
  std::function<uint64_t()> uplink_bytes_per_second;
  // > 0: this member's gradient pushes share an uplink of this many bytes/s
  // (each <= 1 MiB chunk waits for its slot on the clock): emulation of a
  // home link for benchmarks and tests.
  double max_upload_bytes_per_second = 0;
  // Note [Robust averaging] (robust_sum.h): how a shard owner judges the
  // parts it adds.
  RobustOptions robust;
  // Note [Group bans]: a sender with parts left out or pulled in in
  // ban_after rounds of a stage in a row, or in rounds whose decayed count
  // reaches ban_after + 0.5 (Note [Offences in a row] in offence_tally.h),
  // is banned from this node's averaging for good; 0: never
  // (daemons: --avg_ban_after).
  int ban_after = 3;
  // How reduce parts and reduced shards travel (Note [Encoded shards] in
  // shard_codec.h): every replica of the swarm has the same (--avg_codec,
  // the swarm manifest); a push in a format this codec does not send is
  // refused.
  model::AvgCodecSpec codec;
  // Finished rounds are kept, and pushes for them admitted, this many
  // iterations (Note [Push admission]); an overlapped outer round (Note
  // [Overlapped sync] in node_trainer.h) runs for H iterations, so daemons
  // with --outer_overlap pass H + 4.
  uint64_t keep_iterations = 4;
  // Largest accepted contribution (elements).
  int64_t max_elements = int64_t{1} << 28;
  // Note [Peer authentication] (identity/tls_credentials.h): TLS from the
  // node's identity (`self` must be its id; a push or state request whose
  // sender is not the caller's certificate is refused UNAUTHENTICATED, and
  // calls to a member fail unless its server proves to be it), or
  // PeerCredentials::Insecure() behind --insecure. Required (Create refuses
  // null).
  std::shared_ptr<const identity::PeerCredentials> credentials;
  // Note [Peer quotas] (common/peer_quota.h); null: none. A push holds one
  // of its sender's stream slots while it is read and charges one message
  // and its declared bytes (total_elements x 4) at its first chunk; a
  // state request holds a slot while it is served and charges the bytes
  // served. Refused: RESOURCE_EXHAUSTED. Shared with the daemon, which
  // classifies peers and reads the refusals.
  std::shared_ptr<common::PeerQuota> push_quota;
  std::shared_ptr<common::PeerQuota> state_quota;
  // Note [Retried pushes] (grpc_group_push.cc): a push to a member this
  // names (the daemon: relayed members) that fails UNAVAILABLE is tried
  // again every push_retry_every, up to push_retries times, before the
  // member is marked dead. Unset: none (a failed push marks it at once).
  std::function<bool(const common::NodeId&)> retry_pushes_to;
  absl::Duration push_retry_every = absl::Milliseconds(250);
  int push_retries = 20;
  // Note [Evidence bans] (node/stage/evidence_bans.h): the bans this member
  // adopted on checked evidence (accused -> its accuser and whether it
  // rests on a proof), weighed with the verify quorum's (QuorumBans).
  // Called outside the group's locks; thread-safe. Unset: none.
  std::function<EvidencedBans()> evidence_bans;
  // Note [Data node entered later] (data_node_wait.h): the entry of a live
  // data node whose record enters after `iteration` (the earliest), so that
  // iteration will have no data node and HasLiveDataNode lets a waiting
  // relay pass it; nullopt when none. Called outside the group's locks;
  // thread-safe. Unset: never.
  std::function<std::optional<uint64_t>(uint64_t iteration)> data_node_enters_after;
};

class GrpcGroupComm final : public GroupComm {
 public:
  static absl::StatusOr<std::unique_ptr<GrpcGroupComm>> Create(const GrpcGroupOptions& options,
                                                              SwarmView* view,
                                                              common::Clock* clock);
  ~GrpcGroupComm() override;

  int port() const;
  // Waits (blocking) until every member's StageService answers Health, or
  // fails with DEADLINE_EXCEEDED naming the missing ones. For startup.
  // `cancelled` (optional) is polled about every 200 ms: when it turns true
  // the wait ends with CANCELLED (a stop signal while the swarm forms).
  absl::Status AwaitPeers(absl::Duration timeout,
                          const std::function<bool()>& cancelled = nullptr);

  void Barrier(uint64_t iteration, const common::NodeId& self, bool data_node,
               BarrierDone done) override;
  // Note [Stated bounds in the daemons] (grpc_group_sweep.cc): sent with
  // this data node's barrier message of `iteration`.
  void StateIterationBound(uint64_t iteration, const common::NodeId& self,
                           absl::Duration bound) override;
  void AllReduce(uint64_t iteration, int stage, GradientContribution contribution,
                 ReduceDone done) override;
  bool SoleReplica(uint64_t iteration, int stage, const common::NodeId& self) override;
  // Whether the view has a live host of stage 0: the barrier waits for
  // exactly those (Note [Relay without a data node] in data_node_wait.h);
  // also true when options.data_node_enters_after(iteration) says one
  // enters later (Note [Data node entered later]).
  bool HasLiveDataNode(uint64_t iteration) override;
  // options.data_node_enters_after(iteration) while the view has no live
  // host of stage 0; nullopt otherwise.
  std::optional<uint64_t> LaterDataNodeEntry(uint64_t iteration) override;
  // Note [Waking on a data node] (data_node_wait.h): a wake runs at the
  // first sweep (a barrier or gradient message, a recheck) that finds a
  // live stage-0 host in the view; a view change alone sweeps nothing, so
  // the waiter's back-off stays the fallback.
  uint64_t WakeOnDataNode(absl::AnyInvocable<void()> wake) override;
  bool CancelDataNodeWake(uint64_t id) override;
  // Served by StageService.FetchState (<= 1 MiB chunks with CRC-32C); the
  // fetch retries UNAVAILABLE every 100 ms for 10 s while `from` is alive.
  // The view's PeerInfo::on_probation (the daemons: TrainingMembers).
  bool OnProbation(const common::NodeId& id) override;
  void SetStateProvider(const common::NodeId& self, StateProvider provider) override;
  void FetchState(uint64_t iteration, int stage, const common::NodeId& from,
                  StateDone done) override;

  // Note [Entry in the group] (grpc_group_push.cc): a member entering (or
  // re-entering) at `entry`, before it announces it, stands at entry - 1
  // in the push window, so its new replicas' pushes for `entry` and the
  // next are admitted (and held) however far back its own last iteration
  // was. Only moves forward.
  void EnterAt(uint64_t entry);

  // Note [Push admission] (grpc_group_push.cc): pushes refused at their first
  // chunk (iteration window, stage size, early-shard budget), and the bytes
  // of shards held before this node's own AllReduce for them.
  uint64_t pushes_refused() const;
  uint64_t early_bytes() const;
  // Gradient payload bytes this node has written to pushes (reduce-scatter
  // parts and all-gather shards; barriers carry none): the wire figure
  // behind ReduceResult::sent_bytes.
  uint64_t pushed_bytes() const;
  // Gradient messages (reduce-scatter parts and reduced shards, early ones
  // included) this node has taken in whole; a count seen includes what it
  // counts. A caller on a simulated clock waits on it for pushes crossing
  // a real network before it moves time past a round's deadline.
  uint64_t messages_received() const;
  // Note [Leaving with pushes owed] (grpc_group.cc): blocks until the
  // gradient pushes of rounds this node finished, to members the view
  // calls alive, have gone (or failed for good), at most for a bound that
  // follows the bytes owed and never more than `at_most` (clock time). A
  // node calls it before it leaves: a peer that sees the leave before the
  // result of a round that closed it out redoes the round without us and
  // ends on other parameters. True when nothing is owed any more.
  bool FlushPushes(absl::Duration at_most);
  // Note [Group bans]: the senders this node banned, with the reason.
  std::map<common::NodeId, std::string> banned() const;
  // Note [Gossiped bans]: the bans of peers this node adopted at its last
  // AllReduce (a quorum of the accused's live peers publish them).
  std::map<common::NodeId, AdoptedBan> adopted_bans() const;

  class Impl;

 private:
  explicit GrpcGroupComm(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_GRPC_GROUP_H_
