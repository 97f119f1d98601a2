// GrpcGroupComm::Impl: the state and StageService handlers behind
// GrpcGroupComm (grpc_group.h). Private to the grpc_group target; its
// methods live in one file per responsibility:
//
//   grpc_group.cc        the group core: start/stop, channels, push threads,
//                        the public GroupComm calls (Barrier, AllReduce, ...),
//                        Note [Leaving with pushes owed] (FlushPushes)
//   grpc_group_push.cc   PushGradients: chunk checks, Note [Push admission],
//                        received barrier messages and shards, outgoing pushes
//   grpc_group_sweep.cc  completing barriers and reduces, Note [Silent
//                        members], Note [Group liveness] (probes, AwaitPeers)
//   grpc_group_state.cc  FetchState served and fetched (Note [Digest re-sync]
//                        in node_trainer.h), bounded by the stage's size
//
// Thread rule: as GrpcGroupComm. mu_ guards the group's bookkeeping;
// channels_mu_ the channel cache; pushers_mu_ the push threads; owed_mu_
// the pushes owed. No gRPC call or callback runs with mu_ held.
#ifndef SKIPSWARM_NODE_TRAIN_GRPC_GROUP_IMPL_H_
#define SKIPSWARM_NODE_TRAIN_GRPC_GROUP_IMPL_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "node/compute/task_runner.h"
#include "node/train/data_node_wakes.h"
#include "node/train/gossiped_bans.h"
#include "node/train/grpc_group.h"
#include "node/train/offence_tally.h"
#include "node/train/sharded_reduce.h"
#include "node/train/silent_deadline.h"
#include "node/train/uplink_meter.h"
#include "proto/stage.grpc.pb.h"

namespace skipswarm::node {

class GrpcGroupComm::Impl : public proto::StageService::Service,
                            public std::enable_shared_from_this<GrpcGroupComm::Impl> {
 public:
  // Every message is one <= 1 MiB GradientChunk or StateChunk plus its
  // header (a first chunk lists at most kMaxMembers ids, digests, weights
  // and uplinks: a few KiB); anything larger is refused by gRPC before it
  // is read (it was 8 MiB).
  static constexpr int kMaxMessageBytes = (1 << 20) + (64 << 10);
  static constexpr int kPushThreads = 4;
  static constexpr int kMaxMembers = 64;          // replicas in one round
  // Note [Push admission] (grpc_group_push.cc): a push names an iteration at
  // most this far past the newest this node has reached (Barrier / AllReduce
  // called); honest members are never more than one ahead (the barrier), so
  // anything later is refused before a byte of its data is held.
  static constexpr uint64_t kMaxIterationsAhead = 2;
  // Shards held before our own AllReduce (early_): at most this many bytes
  // while no stage's size is known, else kEarlyRounds rounds of every known
  // stage (a round brings each member at most twice its stage's size).
  // A fetched state (Note [Digest re-sync]) is bounded by the stage's known
  // size too (MaxStateBytes), whatever total its sender claims.
  static constexpr uint64_t kUnknownEarlyBytes = uint64_t{64} << 20;
  static constexpr uint64_t kEarlyRounds = 2;
  // Note [Leaving with pushes owed]: a flush's bound beyond the owed
  // bytes' time on the uplink (connection set-up, a loaded machine).
  static constexpr absl::Duration kFlushSlack = absl::Seconds(2);

  Impl(const GrpcGroupOptions& options, SwarmView* view, common::Clock* clock);

  // --- core (grpc_group.cc) ---
  absl::Status Start();
  void Shutdown();
  grpc::Status Health(grpc::ServerContext*, const proto::HealthRequest*,
                      proto::HealthResponse* response) override;
  std::shared_ptr<grpc::Channel> ChannelFor(const std::string& address, const common::NodeId& to);
  void PostFor(const common::NodeId& peer, Task task);
  std::string AddressOf(const common::NodeId& to) const;
  std::vector<common::NodeId> LiveMembers(int stage) const;
  ShardLayout LayoutFor(int stage, const std::vector<common::NodeId>& members) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t OwnUplink();
  const identity::PeerCredentials& creds() const { return *credentials_; }

  // --- pushes in and out (grpc_group_push.cc) ---
  grpc::Status PushGradients(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<proto::GradientAck, proto::GradientChunk>* stream) override;
  static absl::Status Header(const proto::GradientChunk& c, ReduceMessage* m);
  absl::Status CheckChunk(const proto::GradientChunk& chunk, uint32_t expected, size_t have) const;
  // Note [Encoded shards]: the floats of an encoded push, checked against
  // the shard its header names.
  absl::StatusOr<std::vector<float>> DecodePush(const ReduceMessage& m, int64_t n,
                                               absl::string_view bytes) const;
  absl::Status AdmitPush(const ReduceMessage& m, uint64_t elements);
  uint64_t EarlyBudgetLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReachedLocked(uint64_t iteration) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckMember(const common::NodeId& from) const;
  // Counts `result`'s verdicts as offences; bans the senders that reach
  // GrpcGroupOptions::ban_after.
  void CountOffencesLocked(uint64_t iteration, int stage, ReduceResult* result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Note [Peer quotas]: one of `from`'s stream slots into `slot` and one
  // message of `bytes` from its buckets.
  static absl::Status TakeQuota(common::PeerQuota& quota, const common::NodeId& from,
                                uint64_t bytes, common::PeerQuota::StreamSlot* slot);
  // `stated_ms`: the message's stated bound (0: none).
  void ReceiveBarrier(uint64_t iteration, const common::NodeId& from, uint64_t stated_ms);
  // Note [Stated bounds in the daemons]: when the barrier of `iteration`
  // may drop data node `d` that has not arrived (`measured`: its first
  // arrival + the measured deadline).
  absl::Duration DropTimeLocked(const common::NodeId& d, absl::Duration measured) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReceiveReduce(ReduceMessage m);
  void EraseEarlyLocked(std::map<std::pair<uint64_t, int>, std::vector<ReduceMessage>>::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Send(std::vector<OutgoingReduce> out);
  // `attempt`: 0, or the retry's number (Note [Retried pushes]); `owed`:
  // the push's entry in owed_ (0: Push makes one for a gradient push).
  void Push(const common::NodeId& to, uint32_t phase, uint64_t iteration, uint32_t stage,
            std::shared_ptr<const ReduceMessage> m, int attempt = 0, uint64_t owed = 0);
  absl::Status PushNow(const std::string& address, const common::NodeId& to, uint32_t phase,
                       uint64_t iteration, uint32_t stage, const ReduceMessage* m);
  // Whether this node is done with the round (its result decided, or the
  // round forgotten).
  bool RoundOver(uint64_t iteration, int stage);
  // Note [Leaving with pushes owed] (grpc_group.cc): a gradient push is
  // owed from its Push until it went, failed for good or was refused.
  uint64_t Owe(const common::NodeId& to, uint64_t iteration, int stage, uint64_t bytes);
  void Settle(uint64_t owed);
  bool FlushOwed(absl::Duration at_most);

  // --- completion and liveness (grpc_group_sweep.cc) ---
  // Also runs the wakes of Note [Waking on a data node] (data_node_wait.h)
  // once the view has a live data node: every barrier or gradient message
  // and every recheck sweeps.
  void Sweep();
  void ProbeMissing(const std::set<common::NodeId>& members);
  std::shared_ptr<grpc::Channel> ProbeChannel(const std::string& address,
                                              const common::NodeId& to) const;

  // --- state transfer (grpc_group_state.cc) ---
  grpc::Status FetchState(grpc::ServerContext* context, const proto::StateRequest* request,
                          grpc::ServerWriter<proto::StateChunk>* writer) override;
  absl::StatusOr<std::string> FetchNow(const std::string& address, const common::NodeId& to,
                                       uint64_t iteration, int stage);
  void TryFetch(uint64_t iteration, int stage, common::NodeId from, std::shared_ptr<StateDone> done,
                int attempt);
  uint64_t MaxStateBytes(int stage);

  struct PendingReduce {
    std::unique_ptr<ShardedReduce> reduce;
    std::vector<ReduceDone> waiters;
    bool delivered = false;
    absl::Duration since;  // our own AllReduce (clock time)
    // Note [Late members] (sharded_reduce.h): our contribution's, counted
    // from round_since: when the round now running began (our AllReduce,
    // or its last restart after a death or a close). A redone round gets
    // the whole deadline again, so its survivors, whose parts must cross
    // once more, are not closed out by the deadline the first round spent.
    absl::Duration close_after = absl::InfiniteDuration();
    absl::Duration round_since;
    // Note [Silent members]: a member was dropped for silence while this
    // round waited; its wait is not a sample of how long rounds take.
    bool silenced = false;
  };

  const GrpcGroupOptions options_;
  const std::shared_ptr<const identity::PeerCredentials> credentials_ = options_.credentials;
  SwarmView* const view_;
  common::Clock* const clock_;
  DataNodeWakes data_node_wakes_;  // Note [Waking on a data node]
  absl::Mutex pushers_mu_;  // Shutdown empties pushers_ while timers may post
  std::vector<std::unique_ptr<ThreadTaskRunner>> pushers_ ABSL_GUARDED_BY(pushers_mu_);
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;

  // Note [Leaving with pushes owed]: the gradient pushes not yet settled, by
  // entry; owed_version_ moves with every change (and every flush re-check)
  // so that FlushOwed wakes up. Own mutex: taken with no other lock held.
  struct OwedPush {
    common::NodeId to;
    uint64_t iteration = 0;
    int stage = 0;
    uint64_t bytes = 0;
  };
  absl::Mutex owed_mu_;
  std::map<uint64_t, OwedPush> owed_ ABSL_GUARDED_BY(owed_mu_);
  uint64_t next_owed_ ABSL_GUARDED_BY(owed_mu_) = 1;
  uint64_t owed_version_ ABSL_GUARDED_BY(owed_mu_) = 0;

  absl::Mutex channels_mu_;
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_ ABSL_GUARDED_BY(channels_mu_);
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  StateProvider provider_ ABSL_GUARDED_BY(mu_);
  bool recheck_armed_ ABSL_GUARDED_BY(mu_) = false;
  // Members a pending barrier or reduce still waits for (last sweep).
  std::set<common::NodeId> missing ABSL_GUARDED_BY(mu_);
  // When each member was last probed (clock time).
  std::map<common::NodeId, absl::Duration> probed_ ABSL_GUARDED_BY(mu_);
  // Consecutive failed probes per member.
  std::map<common::NodeId, int> probe_failures_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, std::set<common::NodeId>> arrived_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, std::vector<BarrierDone>> barrier_waiters_ ABSL_GUARDED_BY(mu_);
  // When our barrier of each iteration began (clock time).
  std::map<uint64_t, absl::Duration> barrier_since_ ABSL_GUARDED_BY(mu_);
  std::set<uint64_t> silenced_barriers_ ABSL_GUARDED_BY(mu_);  // as PendingReduce::silenced
  // Note [Stated bounds in the daemons]: this node's own statement per
  // iteration (sent with its barrier message; the last 8 kept); per data
  // node its statement not yet released (the barrier it rode, the capped
  // bound) and its last released one; the newest barrier this node passed.
  struct Stated {
    std::optional<std::pair<uint64_t, absl::Duration>> pending;
    std::optional<StatedBound> released;
    StatedPace pace;  // Note [Stated pace]
  };
  std::map<uint64_t, absl::Duration> own_stated_ ABSL_GUARDED_BY(mu_);
  std::map<common::NodeId, Stated> stated_ ABSL_GUARDED_BY(mu_);
  std::optional<uint64_t> passed_barrier_ ABSL_GUARDED_BY(mu_);
  // Durations of recent completed barriers and reduces (Note [Silent members]).
  SilentDeadline silent_ ABSL_GUARDED_BY(mu_);  // Note [Silent members]
  // By (iteration, stage); kept options_.keep_iterations after delivery.
  std::map<std::pair<uint64_t, int>, PendingReduce> reduces_ ABSL_GUARDED_BY(mu_);
  // Shards that came before our own AllReduce for them, and their bytes.
  std::map<std::pair<uint64_t, int>, std::vector<ReduceMessage>> early_ ABSL_GUARDED_BY(mu_);
  uint64_t early_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // The newest iteration this node reached (Barrier / AllReduce), and the
  // element count of each stage it reduced (Note [Push admission]).
  uint64_t reached_ ABSL_GUARDED_BY(mu_) = 0;
  bool reached_any_ ABSL_GUARDED_BY(mu_) = false;
  std::map<int, uint64_t> stage_elements_ ABSL_GUARDED_BY(mu_);
  uint64_t stats_pushes_refused_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t stats_messages_received_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<uint64_t> pushed_bytes_{0};
  // Per stage: this member's int8 error feedback for the reduced shards it
  // owns (Note [Encoded shards] in shard_codec.h), used by its rounds.
  std::map<int, std::vector<float>> gather_residual_ ABSL_GUARDED_BY(mu_);
  // Per stage: every member's uplink figure from its last finished round.
  std::map<int, std::map<common::NodeId, uint64_t>> figures_ ABSL_GUARDED_BY(mu_);
  // Note [Group bans]: per (stage, sender) its run of offences (Note
  // [Offences in a row] in offence_tally.h); the banned senders and why (own
  // mutex: banned() reads it without mu_; taken after mu_ where both are held).
  OffenceTally offences_ ABSL_GUARDED_BY(mu_){options_.ban_after};
  mutable absl::Mutex bans_mu_;
  std::map<common::NodeId, std::string> banned_ ABSL_GUARDED_BY(bans_mu_);
  // Note [Gossiped bans]: the peers' bans adopted at the last AllReduce.
  GossipedBans gossiped_ ABSL_GUARDED_BY(bans_mu_);
  UplinkMeter uplink_;
  const std::unique_ptr<UploadPacer> pacer_ =
      options_.max_upload_bytes_per_second > 0
          ? std::make_unique<UploadPacer>(options_.max_upload_bytes_per_second)
          : nullptr;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_GRPC_GROUP_IMPL_H_
