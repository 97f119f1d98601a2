#include "sim/node_world.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace skipswarm::sim {

NodeWorld::NodeWorld(common::SimClock* clock, const scheduler::TopologyView* universe,
                     double stream_timeout_s)
    : clock_(clock), universe_(universe), stream_timeout_s_(stream_timeout_s) {
  nodes_.resize(universe->num_nodes());
  transports_.assign(universe->num_nodes(), nullptr);
  for (int u = 0; u < universe->num_nodes(); ++u) {
    nodes_[u].id = universe->node(u).id;
    nodes_[u].stage = universe->stage(u);
    index_[nodes_[u].id] = u;
  }
}

double NodeWorld::now() const { return absl::ToDoubleSeconds(clock_->SteadyNow()); }

int NodeWorld::Find(const common::NodeId& id) const {
  auto it = index_.find(id);
  return it == index_.end() ? -1 : it->second;
}

bool NodeWorld::LinkUp(int a, int b) const {
  const std::string& ra = universe_->node(a).region;
  const std::string& rb = universe_->node(b).region;
  for (const auto& regions : partitions_) {
    const bool ia = std::find(regions.begin(), regions.end(), ra) != regions.end();
    const bool ib = std::find(regions.begin(), regions.end(), rb) != regions.end();
    if (ia != ib) return false;
  }
  return true;
}

bool NodeWorld::Member(int u) const {
  const WorldNode& n = nodes_[u];
  const double t = now();
  return n.present && n.ready_at <= t && n.declared_dead > t;
}

void NodeWorld::RaiseAfterTimeout(int at, int peer) {
  clock_->RunAfter(absl::Seconds(stream_timeout_s_), [this, at, peer] {
    // Still registered (alive) and the peer still unreachable from it.
    if (transports_[at] != nullptr && !Reachable(at, peer)) {
      transports_[at]->RaiseIfContacted(peer);
    }
  });
}

void NodeWorld::Crash(int u) {
  nodes_[u].death = now();
  Touch();
  for (int a = 0; a < size(); ++a) {
    if (a != u && transports_[a] != nullptr) RaiseAfterTimeout(a, u);
  }
}

void NodeWorld::DeclareDead(int u) {
  nodes_[u].declared_dead = now();
  Touch();
}

void NodeWorld::Revive(int u, double ready_at) {
  WorldNode& n = nodes_[u];
  n.present = true;
  n.death = n.declared_dead = kNever;
  n.ready_at = ready_at;
  Touch();
  clock_->RunAt(absl::Seconds(ready_at), [this, u] {
    ForgetVerdicts(u);
    Touch();
  });
}

void NodeWorld::ForgetVerdicts(int u) {
  for (WorldSwarmView* v : views_) v->Forget(nodes_[u].id);
}

void NodeWorld::SetSpeed(int u, double factor) {
  nodes_[u].speed = factor;
  Touch();
}

void NodeWorld::AddPartition(const std::vector<std::string>& regions) {
  partitions_.push_back(regions);
  Touch();
  for (int a = 0; a < size(); ++a) {
    if (transports_[a] == nullptr) continue;
    for (int b = 0; b < size(); ++b) {
      if (a != b && !LinkUp(a, b)) RaiseAfterTimeout(a, b);
    }
  }
}

void NodeWorld::RemovePartition(const std::vector<std::string>& regions) {
  auto it = std::find(partitions_.begin(), partitions_.end(), regions);
  if (it == partitions_.end()) return;
  partitions_.erase(it);
  Touch();
  // Streams can be opened again: verdicts about live peers are dropped.
  for (int u = 0; u < size(); ++u) {
    if (Alive(u)) ForgetVerdicts(u);
  }
}

void NodeWorld::Register(int u, WorldTransport* t) { transports_[u] = t; }

void NodeWorld::Unregister(int u, WorldTransport* t) {
  if (transports_[u] == t) transports_[u] = nullptr;
}

// --- WorldSwarmView ---------------------------------------------------------

WorldSwarmView::WorldSwarmView(NodeWorld* world, int self, const GossipLiveness* gossip)
    : world_(world), self_(self), gossip_(gossip) {
  world_->Register(this);
}

WorldSwarmView::~WorldSwarmView() { world_->Unregister(this); }

const std::vector<node::PeerInfo>& NodeWorld::Members() const {
  if (members_version_ == version_) return members_;
  members_.clear();
  for (int v = 0; v < size(); ++v) {
    const WorldNode& n = nodes_[v];
    if (!n.present || n.ready_at > now()) continue;
    members_.push_back({n.id, {n.stage}, universe_->memory_slots(v), "", ""});
  }
  std::sort(members_.begin(), members_.end(),
            [](const node::PeerInfo& a, const node::PeerInfo& b) { return a.id < b.id; });
  members_version_ = version_;
  return members_;
}

std::vector<node::PeerInfo> WorldSwarmView::Members() const { return world_->Members(); }

bool WorldSwarmView::IsAlive(const common::NodeId& id) const {
  const int v = world_->Find(id);
  if (v < 0 || !world_->Member(v)) return false;
  if (gossip_ != nullptr && !gossip_->Live(self_, v)) return false;
  absl::MutexLock lock(&mu_);
  return !dead_.contains(id);
}

std::vector<common::NodeId> WorldSwarmView::Replicas(int stage) const {
  std::vector<common::NodeId> out;
  for (int v = 0; v < world_->size(); ++v) {
    const WorldNode& n = world_->node(v);
    if (n.stage == stage && IsAlive(n.id)) out.push_back(n.id);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void WorldSwarmView::MarkDead(const common::NodeId& id) {
  absl::MutexLock lock(&mu_);
  if (dead_.insert(id).second) ++local_version_;
}

void WorldSwarmView::Forget(const common::NodeId& id) {
  absl::MutexLock lock(&mu_);
  if (dead_.erase(id) > 0) ++local_version_;
}

uint64_t WorldSwarmView::version() const {
  absl::MutexLock lock(&mu_);
  // Each term only grows, so the sum does whenever one of them does.
  return world_->version() * 1000003 + local_version_ +
         (gossip_ != nullptr ? gossip_->version(self_) : 0);
}

// --- WorldTransport ---------------------------------------------------------

WorldTransport::WorldTransport(std::unique_ptr<node::Transport> inner, NodeWorld* world, int self)
    : ForwardingTransport(std::move(inner)), world_(world), self_(self) {
  world_->Register(self_, this);
  // The world is the only source of failure events (see the header).
  this->inner()->SetPeerFailureHandler([](const node::PeerId&, const absl::Status&) {});
}

WorldTransport::~WorldTransport() {
  guard_.Close();
  world_->Unregister(self_, this);
}

void WorldTransport::SetPeerFailureHandler(node::PeerFailureHandler handler) {
  on_failure_ = std::move(handler);
}

void WorldTransport::RaiseIfContacted(int peer) {
  if (!contacted_.count(peer) || !on_failure_) return;
  on_failure_(world_->node(peer).id,
              absl::UnavailableError("stream timed out (peer crashed or cut off)"));
}

void WorldTransport::Fail(node::SendDone done, absl::Status why, uint64_t iteration, uint64_t mb,
                          int to, double sent_s) {
  FailedSend& record = world_->last_failed_send();
  record = {true, iteration, mb, self_, to, sent_s};
  done(std::move(why));
  record.valid = false;
}

void WorldTransport::Send(const node::PeerId& to, node::Frame frame, node::SendDone done) {
  const int v = world_->Find(to);
  const uint64_t iteration = frame.header.iteration();
  const uint64_t mb = frame.header.mb_id();
  const double sent = world_->now();
  if (v >= 0 && !world_->Reachable(self_, v)) {
    // Nobody answers: the stream times out (a no-op if this node is gone
    // too).
    world_->clock()->RunAfter(
        absl::Seconds(world_->stream_timeout_s()),
        guard_.Wrap([this, done = std::move(done), iteration, mb, v, sent]() mutable {
          Fail(std::move(done), absl::UnavailableError("stream timed out"), iteration, mb, v,
               sent);
        }));
    return;
  }
  if (v >= 0) contacted_.insert(v);
  inner()->Send(to, std::move(frame),
               guard_.Wrap([this, done = std::move(done), iteration, mb, v,
                            sent](absl::Status ack) mutable {
                 if (ack.ok() || v < 0) return done(std::move(ack));
                 // A crashed machine does not refuse: its peer finds out
                 // when the stream times out.
                 const double death = world_->node(v).death;
                 const double at = death == kNever
                                       ? world_->now()
                                       : std::max(world_->now(),
                                                  death + world_->stream_timeout_s());
                 if (at <= world_->now()) {
                   return Fail(std::move(done), std::move(ack), iteration, mb, v, sent);
                 }
                 world_->clock()->RunAt(
                     absl::Seconds(at), guard_.Wrap([this, done = std::move(done), ack,
                                                     iteration, mb, v, sent]() mutable {
                       Fail(std::move(done), ack, iteration, mb, v, sent);
                     }));
               }));
}

// --- WorldCompute -----------------------------------------------------------

WorldCompute::WorldCompute(std::unique_ptr<node::StageCompute> inner, NodeWorld* world, int self)
    : ForwardingStageCompute(std::move(inner)), world_(world), self_(self) {}

template <typename Done>
Done WorldCompute::Slowed(Done done) {
  const double factor = world_->node(self_).speed;
  const double started = world_->now();
  common::SimClock* clock = world_->clock();
  NodeWorld* world = world_;
  std::shared_ptr<double> busy = busy_s_;
  return [done = std::move(done), factor, started, clock, world, busy](auto out) mutable {
    const double took = world->now() - started;
    *busy += factor * took;
    if (factor <= 1 || took <= 0) return done(std::move(out));
    clock->RunAfter(absl::Seconds((factor - 1) * took),
                    [done = std::move(done), out = std::move(out)]() mutable {
                      done(std::move(out));
                    });
  };
}

void WorldCompute::Start(uint64_t mb, node::MicroBatchData data, node::TensorDone done) {
  inner()->Start(mb, std::move(data), Slowed(std::move(done)));
}

void WorldCompute::Forward(uint64_t mb, node::WireTensor input, node::TensorDone done) {
  inner()->Forward(mb, std::move(input), Slowed(std::move(done)));
}

void WorldCompute::Tail(uint64_t mb, node::WireTensor activation, node::TailDone done) {
  inner()->Tail(mb, std::move(activation), Slowed(std::move(done)));
}

void WorldCompute::Backward(uint64_t mb, node::WireTensor grad_output, node::TensorDone done) {
  inner()->Backward(mb, std::move(grad_output), Slowed(std::move(done)));
}

}  // namespace skipswarm::sim
