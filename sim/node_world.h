// NodeWorld: the simulated world around node/'s real classes on the
// real-node backend (sim/node_swarm.h) — what no node knows: who crashed and
// when, when the failure detector's verdict reached every member, which
// regions are cut off from the rest, who is slowed down — and the three
// seams through which the real StageServer / DataNodeDriver / NodeTrainer
// see it:
//
//  * WorldSwarmView (node::SwarmView, one per node): the members that have
//    joined and finished state transfer; a member is alive until the
//    failure detector has declared it dead or this node's own
//    transport-level verdict (MarkDead, from the stage server) says so. The
//    detector is either this node's own gossip view (a GossipLiveness:
//    membership/'s real SWIM, sim/swim_gossip.h) or the detector model
//    (NodeWorld::DeclareDead, in every view at once, at the model's delay
//    after the crash). Own verdicts about a peer are forgotten when the
//    world brings it back (a partition heals, a crashed node is replaced).
//  * WorldTransport (node::Transport decorator, one per node, above the
//    shaper): a send to a crashed peer or over a cut link fails UNAVAILABLE
//    after stream_timeout_s (a WAN stream to a silent peer); a send already
//    on the wire to a peer that crashes fails no earlier than crash +
//    stream_timeout_s. A crash or a cut raises a peer-failure event,
//    stream_timeout_s later, at every node that had sent to that peer (its
//    stream breaks); the wrapped transport's own failure events are ignored.
//    Frames already on the wire across a new cut are delivered.
//  * WorldCompute (node::StageCompute decorator): while its node is a
//    straggler (speed factor f > 1 when the task starts) a task's result is
//    held (f - 1) x its duration longer; busy time (f x duration) is summed.
//
// No protocol logic lives here: re-routing, drops, aborts, deadlines,
// barriers and averaging are node/'s; the world only decides what the
// network and the machines do.
//
//   NodeWorld world(&clock, universe, /*stream_timeout_s=*/0.5);
//   world.node(u).present = true;
//   auto t = std::make_unique<WorldTransport>(std::move(shaped), &world, u);
//   world.Crash(u);                       // at the clock's now
//
// Thread rule: single-threaded — everything runs on the SimClock's thread
// (the node classes call these seams from clock callbacks). The clock and
// the universe outlive the world; the world outlives every seam.
#ifndef SKIPSWARM_SIM_NODE_WORLD_H_
#define SKIPSWARM_SIM_NODE_WORLD_H_

#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "common/lifetime_guard.h"
#include "common/sim_clock.h"
#include "node/compute/forwarding_stage_compute.h"
#include "node/stage/swarm_view.h"
#include "node/transport/forwarding_transport.h"
#include "scheduler/topology.h"

namespace skipswarm::sim {

class WorldTransport;
class WorldSwarmView;

inline constexpr double kNever = std::numeric_limits<double>::infinity();

struct WorldNode {
  common::NodeId id;
  int stage = 0;
  bool present = false;       // a member (joined, not left for good)
  double death = kNever;      // crash time
  double declared_dead = kNever;  // the detector's verdict, in every view
  double ready_at = 0;        // serving from (state transfer done)
  double speed = 1;           // straggler factor (compute time x)
};

// The last send that failed, as the sender's WorldTransport saw it; set
// just before the stage server's ack callback runs (which may re-route
// synchronously) and cleared after. For detection times in reports.
struct FailedSend {
  bool valid = false;
  uint64_t iteration = 0;
  uint64_t mb = 0;
  int from = -1;
  int to = -1;
  double sent_s = 0;
};

// A node's gossip view of who is alive (sim/swim_gossip.h), by universe
// index; single-threaded like the world.
class GossipLiveness {
 public:
  virtual ~GossipLiveness() = default;
  // Whether `observer`'s view holds `subject` live (ALIVE or SUSPECT).
  virtual bool Live(int observer, int subject) const = 0;
  // Increases whenever Live(observer, .) may have changed.
  virtual uint64_t version(int observer) const = 0;
};

class NodeWorld {
 public:
  NodeWorld(common::SimClock* clock, const scheduler::TopologyView* universe,
            double stream_timeout_s);

  double now() const;
  common::SimClock* clock() const { return clock_; }
  const scheduler::TopologyView& universe() const { return *universe_; }
  int size() const { return static_cast<int>(nodes_.size()); }
  WorldNode& node(int u) { return nodes_[u]; }
  const WorldNode& node(int u) const { return nodes_[u]; }
  int Find(const common::NodeId& id) const;  // -1 if not in the universe

  bool Alive(int u) const { return nodes_[u].present && nodes_[u].death > now(); }
  // No active partition separates a and b.
  bool LinkUp(int a, int b) const;
  // `from` can reach `to` right now.
  bool Reachable(int from, int to) const { return Alive(to) && LinkUp(from, to); }
  // Whether `u` is in views: joined, state transferred, not declared dead.
  bool Member(int u) const;

  // u crashes now: peer-failure events stream_timeout_s later.
  void Crash(int u);
  // Every view now calls u dead (the detector's verdict).
  void DeclareDead(int u);
  // u is a member again (a replacement with the same identity, serving
  // from ready_at): own verdicts about it are forgotten then.
  void Revive(int u, double ready_at);
  void SetSpeed(int u, double factor);
  void AddPartition(const std::vector<std::string>& regions);
  void RemovePartition(const std::vector<std::string>& regions);
  const std::vector<std::vector<std::string>>& partitions() const { return partitions_; }

  // Changes whenever membership, verdicts, speeds or partitions change;
  // whoever writes a WorldNode directly calls Touch().
  uint64_t version() const { return version_; }
  void Touch() { ++version_; }
  // Joined and state-transferred nodes (alive or not), ascending id; cached
  // per version.
  const std::vector<node::PeerInfo>& Members() const;

  FailedSend& last_failed_send() { return last_failed_send_; }
  double stream_timeout_s() const { return stream_timeout_s_; }

  // Registration of the seams (constructor / destructor of each).
  void Register(int u, WorldTransport* t);
  void Unregister(int u, WorldTransport* t);
  void Register(WorldSwarmView* v) { views_.insert(v); }
  void Unregister(WorldSwarmView* v) { views_.erase(v); }

 private:
  void RaiseAfterTimeout(int at, int peer);
  void ForgetVerdicts(int u);

  common::SimClock* const clock_;
  const scheduler::TopologyView* const universe_;
  const double stream_timeout_s_;
  std::vector<WorldNode> nodes_;
  absl::flat_hash_map<common::NodeId, int> index_;
  std::vector<std::vector<std::string>> partitions_;
  std::vector<WorldTransport*> transports_;  // per universe node, live only
  std::set<WorldSwarmView*> views_;
  uint64_t version_ = 0;
  FailedSend last_failed_send_;
  mutable std::vector<node::PeerInfo> members_;
  mutable uint64_t members_version_ = ~uint64_t{0};
};

class WorldSwarmView final : public node::SwarmView {
 public:
  // `gossip` (may be null: the detector model's verdicts in the world) must
  // outlive the view; `self` is this node's universe index.
  explicit WorldSwarmView(NodeWorld* world, int self = -1,
                          const GossipLiveness* gossip = nullptr);
  ~WorldSwarmView() override;

  std::vector<node::PeerInfo> Members() const override;
  bool IsAlive(const common::NodeId& id) const override;
  std::vector<common::NodeId> Replicas(int stage) const override;
  void MarkDead(const common::NodeId& id) override;
  uint64_t version() const override;
  // The simulated world keeps no measured links and no signed records.
  std::optional<node::LinkEstimate> Link(const common::NodeId&,
                                         const common::NodeId&) const override {
    return std::nullopt;
  }
  std::optional<uint64_t> StopAfter(const common::NodeId&) const override { return std::nullopt; }
  std::optional<uint64_t> Incarnation(const common::NodeId&) const override {
    return std::nullopt;
  }

  // The world brought `id` back: drop this node's verdict about it.
  void Forget(const common::NodeId& id);

 private:
  NodeWorld* const world_;
  const int self_;
  const GossipLiveness* const gossip_;
  mutable absl::Mutex mu_;  // the interface promises thread safety
  absl::flat_hash_set<common::NodeId> dead_ ABSL_GUARDED_BY(mu_);
  uint64_t local_version_ ABSL_GUARDED_BY(mu_) = 0;
};

class WorldTransport final : public node::ForwardingTransport {
 public:
  WorldTransport(std::unique_ptr<node::Transport> inner, NodeWorld* world, int self);
  ~WorldTransport() override;

  void SetPeerFailureHandler(node::PeerFailureHandler handler) override;
  void Send(const node::PeerId& to, node::Frame frame, node::SendDone done) override;

  // The world's failure event for `peer`, if this node had sent to it.
  void RaiseIfContacted(int peer);

 private:
  void Fail(node::SendDone done, absl::Status why, uint64_t iteration, uint64_t mb,
            int to, double sent_s);

  NodeWorld* const world_;
  const int self_;
  node::PeerFailureHandler on_failure_;
  std::set<int> contacted_;
  // Send completions and stream time-outs act only while this transport lives.
  common::LifetimeGuard guard_;
};

class WorldCompute final : public node::ForwardingStageCompute {
 public:
  WorldCompute(std::unique_ptr<node::StageCompute> inner, NodeWorld* world, int self);

  double busy_s() const { return *busy_s_; }

  void Start(uint64_t mb, node::MicroBatchData data, node::TensorDone done) override;
  void Forward(uint64_t mb, node::WireTensor input, node::TensorDone done) override;
  void Tail(uint64_t mb, node::WireTensor activation, node::TailDone done) override;
  void Backward(uint64_t mb, node::WireTensor grad_output, node::TensorDone done) override;

 private:
  // Wraps `done` so the result is held while the node is slow.
  template <typename Done>
  Done Slowed(Done done);

  NodeWorld* const world_;
  const int self_;
  std::shared_ptr<double> busy_s_ = std::make_shared<double>(0);
};

}  // namespace skipswarm::sim

#endif  // SKIPSWARM_SIM_NODE_WORLD_H_
