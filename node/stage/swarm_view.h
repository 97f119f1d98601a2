// SwarmView: the node's picture of who is in the swarm and which stages
// they host, as node code reads it (re-routing, planning, replica groups).
// It comes from the config file's static peer list (StaticSwarmView), from
// gossip (TrainingMembers in node/daemon) or from the simulator's world.
//
//   StaticSwarmView view({{a, {0}, 4}, {b, {1}, 4}, {c, {1}, 4}});
//   std::vector<PeerId> r = view.Replicas(1);    // {b, c}, ascending id
//   view.MarkDead(b);                            // local verdict
//
// Members carry their measured compute speed; Link() gives measured links
// where the implementation has them (gossip: TrainingMembers).
//
// Thread rule: implementations are thread-safe.
#ifndef SKIPSWARM_NODE_STAGE_SWARM_VIEW_H_
#define SKIPSWARM_NODE_STAGE_SWARM_VIEW_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/node_id.h"

namespace skipswarm::node {

struct PeerInfo {
  common::NodeId id;
  std::vector<int> stages;  // hosted stages; 0 = data node
  int memory_slots = 4;
  std::string address{};      // pipeline "host:port" (gRPC); empty in-process
  std::string group_address{};  // StageService "host:port" (replica averaging)
  // Measured compute speed, seconds per layer per sample (the record's
  // seconds_per_layer_per_sample, Note [Measured speeds] in
  // node/daemon/reporting/speed_reports.h); 0 = unknown (static lists, the simulator,
  // a member that has not published yet). Planners fall back to estimates.
  double sec_per_layer_sample = 0;
  // Trains its own subnetwork of `stages` (SDP): it averages them with
  // their other hosts, but no pipeline route may pass through it
  // (PipelineHostsView).
  bool subnetwork = false;
  // Not yet trusted in an open swarm (Note [Newcomer probation] in
  // node/daemon/gossip/training_members.h): a shard owner gives its
  // replica-averaging parts RobustOptions::newcomer_weight (Note [Newcomer
  // weight] in node/train/robust_sum.h).
  bool on_probation = false;
  // The members its record names as banned from its replica averaging
  // (Note [Gossiped bans] in node/train/gossiped_bans.h); empty in static
  // lists and the simulator.
  std::vector<common::NodeId> bans{};
  // Answers verify-only frames as checks (Note [Sending checks] in
  // stage_server_verify_send.cc): gossip takes it from the record
  // (NodeRecord.verify_frames; false for an older build, which would train
  // on them); static lists and the simulator run one build: true.
  bool verify_frames = true;
  // Announced its entry into `stages` and has not loaded their state yet
  // (NodeRecord.entering from its entry on): its replica rounds do not wait
  // for its part (Note [Entering members] in node/train/grpc_group.h).
  bool entering = false;
};

// What `from` measured of its link to `to` (membership::LinkInfo, from
// gossip ping/ack and pipeline transfers); either part may be unknown.
struct LinkEstimate {
  absl::Duration rtt = absl::InfiniteDuration();  // smoothed; infinite = unknown
  double bytes_per_second = 0;                    // smoothed; <= 0 = unknown
  // When `from` last measured bytes_per_second (its wall clock; pings do not
  // refresh it). Planners stop trusting an old one (Note [Planning from
  // measured links]); InfiniteFuture: unknown, never ages.
  absl::Time throughput_measured_at = absl::InfiniteFuture();
};

class SwarmView {
 public:
  virtual ~SwarmView() = default;
  // Every known member, alive or not, ascending id.
  virtual std::vector<PeerInfo> Members() const = 0;
  virtual bool IsAlive(const common::NodeId& id) const = 0;
  // Alive members hosting `stage`, ascending id.
  virtual std::vector<common::NodeId> Replicas(int stage) const = 0;
  // Records that this node saw `id` fail (transport event or deadline).
  virtual void MarkDead(const common::NodeId& id) = 0;
  // Increases whenever membership or liveness changes.
  virtual uint64_t version() const = 0;
  // The latest measurement `from` published of its link to `to`, or
  // nullopt when there is none. Views without measurements (static lists,
  // the simulator) answer nullopt; planners then use estimates (Note
  // [Planning from measured links] in node/train/scheduler_planner.cc).
  // Pure, as StopAfter: a view that wraps another must pass both on (a
  // wrapper that inherited a nullopt default hid every stopping record from
  // the daemons' data nodes), and one without them says so.
  virtual std::optional<LinkEstimate> Link(const common::NodeId& from,
                                           const common::NodeId& to) const = 0;
  // The last iteration `id`'s own signed record says it trains: as a
  // stopping last replica (record.stopping with stop_after, Note [Stopping
  // last replica] in node/daemon/gossip/training_members.h) or as a member
  // that left (LEFT with its exit iteration, Note [Leaving] there); nullopt
  // when the view holds no such record. Only what `id` signed itself: the
  // data node confirms a relayed stopping claim against it (Note
  // [Confirmed stopping] in node/train/data_node_driver.h). Views without
  // records answer nullopt.
  virtual std::optional<uint64_t> StopAfter(const common::NodeId& id) const = 0;
  // The incarnation of `id`'s own signed record the view holds (it grows
  // with every record `id` signs: a change, a restart under the same key);
  // nullopt when the view holds no record of `id`. Pure, as StopAfter: the
  // data node ends a stopping mark when a newer record of the node says
  // neither stopping nor LEFT (Note [Confirmed stopping] in
  // node/train/data_node_driver.h). Views without records answer nullopt.
  virtual std::optional<uint64_t> Incarnation(const common::NodeId& id) const = 0;
};

class StaticSwarmView final : public SwarmView {
 public:
  explicit StaticSwarmView(std::vector<PeerInfo> members);

  std::vector<PeerInfo> Members() const override;
  bool IsAlive(const common::NodeId& id) const override;
  std::vector<common::NodeId> Replicas(int stage) const override;
  void MarkDead(const common::NodeId& id) override;
  uint64_t version() const override;
  // A static list has no measurements.
  std::optional<LinkEstimate> Link(const common::NodeId&, const common::NodeId&) const override {
    return std::nullopt;
  }

  // Routing only (Note [Paused members] in node/daemon/gossip/
  // training_members.h): a paused member is neither listed nor a replica,
  // but stays alive for the hops already routed through it. Not for a
  // view that also names a replica group (it would drop out of averaging).
  void SetPaused(const common::NodeId& id, bool paused);
  // A stopping record of `id` (StopAfter) reached this view; nullopt: none.
  // A record `id` signed anew: its incarnation grows by one.
  void SetStopping(const common::NodeId& id, std::optional<uint64_t> stop_after);
  std::optional<uint64_t> StopAfter(const common::NodeId& id) const override;
  // A newer record of member `id` that changes nothing else here (a
  // restart under the same key, an update) reached this view.
  void NewRecord(const common::NodeId& id);
  // Each member's record starts at incarnation 1; nullopt for a non-member.
  std::optional<uint64_t> Incarnation(const common::NodeId& id) const override;

  // Replaces the addresses of member `info.id` (ports found at runtime).
  void SetAddresses(const common::NodeId& id, const std::string& address,
                    const std::string& group_address);

 private:
  mutable absl::Mutex mu_;
  std::vector<PeerInfo> members_ ABSL_GUARDED_BY(mu_);  // sorted by id
  absl::flat_hash_set<common::NodeId> dead_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<common::NodeId> paused_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<common::NodeId, uint64_t> stopping_ ABSL_GUARDED_BY(mu_);
  // Record changes past incarnation 1 (SetStopping, NewRecord).
  absl::flat_hash_map<common::NodeId, uint64_t> resigned_ ABSL_GUARDED_BY(mu_);
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
};

// The members a pipeline route may pass through: `view` without its
// subnetwork (SDP) members, which train their own routes and only average
// with the rest (Note [Mixed local swarm] in launcher/local_layout.h).
// Pipeline planners and repairers read the swarm through it. Read-only: it
// borrows `view` (which must outlive it) const, and MarkDead does nothing.
class PipelineHostsView final : public SwarmView {
 public:
  explicit PipelineHostsView(const SwarmView& view) : view_(view) {}
  std::vector<PeerInfo> Members() const override;
  bool IsAlive(const common::NodeId& id) const override { return view_.IsAlive(id); }
  std::vector<common::NodeId> Replicas(int stage) const override;
  void MarkDead(const common::NodeId& id) override { (void)id; }
  uint64_t version() const override { return view_.version(); }
  std::optional<LinkEstimate> Link(const common::NodeId& from,
                                   const common::NodeId& to) const override {
    return view_.Link(from, to);
  }
  std::optional<uint64_t> StopAfter(const common::NodeId& id) const override {
    return view_.StopAfter(id);
  }
  std::optional<uint64_t> Incarnation(const common::NodeId& id) const override {
    return view_.Incarnation(id);
  }

 private:
  const SwarmView& view_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_STAGE_SWARM_VIEW_H_
