#include "sim/executor.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/time/time.h"
#include "node/stage/swarm_view.h"

namespace skipswarm::sim {
namespace {


// Task t of a route with p hops: F(nodes[t]) for t < p, Loss(origin) at
// t == p, then B(nodes[2p - t]) (scheduler/evaluator.h).
inline int TaskNode(const std::vector<int>& nodes, int p, int t) {
  if (t < p) return nodes[t];
  if (t == p) return nodes[0];
  return nodes[2 * p - t];
}

// What the holder of a failed hop knows when it repairs: the plan's
// members, each alive until gossip declared it dead.
class HolderView final : public node::SwarmView {
 public:
  HolderView(const scheduler::TopologyView* view,
             const absl::flat_hash_map<common::NodeId, int>* index,
             WorldHooks* world, double now)
      : view_(view), index_(index), world_(world), now_(now) {}
  std::vector<node::PeerInfo> Members() const override {
    std::vector<node::PeerInfo> out;
    for (int v = 0; v < view_->num_nodes(); ++v) {
      if (!view_->alive(v)) continue;
      out.push_back({view_->node(v).id, {view_->stage(v)},
                     view_->memory_slots(v), "", ""});
    }
    return out;
  }
  bool IsAlive(const common::NodeId& id) const override {
    auto it = index_->find(id);
    return it != index_->end() && view_->alive(it->second) &&
           world_->GossipDeadTime(it->second) > now_;
  }
  std::vector<common::NodeId> Replicas(int stage) const override {
    std::vector<common::NodeId> out;
    for (int v : view_->stage_nodes(stage)) {
      if (IsAlive(view_->node(v).id)) out.push_back(view_->node(v).id);
    }
    return out;
  }
  void MarkDead(const common::NodeId&) override {}
  uint64_t version() const override { return 0; }
  // The simulated world keeps no measured links and no signed records.
  std::optional<node::LinkEstimate> Link(const common::NodeId&,
                                         const common::NodeId&) const override {
    return std::nullopt;
  }
  std::optional<uint64_t> StopAfter(const common::NodeId&) const override { return std::nullopt; }
  std::optional<uint64_t> Incarnation(const common::NodeId&) const override {
    return std::nullopt;
  }

 private:
  const scheduler::TopologyView* view_;
  const absl::flat_hash_map<common::NodeId, int>* index_;
  WorldHooks* world_;
  const double now_;
};

}  // namespace

struct IterationExecutor::Mb {
  scheduler::Route route;
  int p = 0;
  int task = 0;  // the pending task: in flight, queued or running
  int gen = 0;   // bumped when the route changes or the MB dies
  bool done = false;
  bool dropped = false;
  bool awaiting = false;  // a failure is detected later; ignore deaths
  bool rerouted = false;
  // The pending forward reached its node (queued or running there): the
  // node admitted it, and the holder no longer re-sends it.
  bool admitted = false;
  std::vector<int> slot_nodes;  // nodes where it holds a memory slot
};

enum EventType { kArrive, kDone, kDetect, kDrop, kResend };

struct IterationExecutor::Event {
  double time;
  long seq;
  EventType type;
  int node;  // kArrive/kDone: where; kDetect: the failed node
  int mb;
  int task;
  int gen;
  int from = -1;          // kDetect: the holder
  double failed_at = 0;   // kDetect / kDrop
};

bool IterationExecutor::EventLater::operator()(const Event& a,
                                               const Event& b) const {
  if (a.time != b.time) return a.time > b.time;
  return a.seq > b.seq;
}

struct IterationExecutor::Ready {
  int priority;
  double ready_s;
  int mb_id;
  int mb;
  int task;
  int gen;
};

namespace {
struct ReadyLater {
  template <typename R>
  bool operator()(const R& a, const R& b) const {
    if (a.priority != b.priority) return a.priority > b.priority;
    if (a.ready_s != b.ready_s) return a.ready_s > b.ready_s;
    if (a.mb_id != b.mb_id) return a.mb_id > b.mb_id;
    return a.mb > b.mb;
  }
};
}  // namespace

struct IterationExecutor::NodeState {
  bool busy = false;
  bool dead = false;
  bool touched = false;
  int slots_used = 0;
  double busy_s = 0;
  std::priority_queue<Ready, std::vector<Ready>, ReadyLater> forward;
  std::priority_queue<Ready, std::vector<Ready>, ReadyLater> backward;
};

IterationExecutor::IterationExecutor(const scheduler::TopologyView& view,
                                     const scheduler::Workload& workload,
                                     common::SimClock* clock,
                                     WorldHooks* world,
                                     ExecutorOptions options)
    : view_(view),
      workload_(workload),
      clock_(clock),
      world_(world),
      options_(options) {
  for (int v = 0; v < view.num_nodes(); ++v) index_[view.node(v).id] = v;
  // The nodes backend's repairer recipe (sim/node_planning.h) on the
  // executor's world: the plan's costs, partitions cut links.
  node::SchedulerRepairerOptions ro;
  ro.costs.layers_per_stage = view.model().layers_per_stage;
  ro.costs.samples_per_mb = view.model().samples_per_mb;
  ro.costs.bytes_per_mb = view.model().bytes_per_mb;
  ro.costs.sec_per_layer_sample_of = [this](const common::NodeId& id) {
    return view_.node(index_.at(id)).sec_per_layer_sample;
  };
  ro.costs.hop_s_of = [this](const common::NodeId& a, const common::NodeId& b) {
    const int x = index_.at(a), y = index_.at(b);
    return world_->LinkUp(x, y) ? view_.hop_s(x, y) : scheduler::kNoLink;
  };
  ro.max_swaps = workload.max_swaps;
  ro.max_jump = workload.max_jump;
  repairer_ = std::make_unique<node::SchedulerRouteRepairer>(ro);
}

IterationExecutor::~IterationExecutor() = default;

double IterationExecutor::Now() {
  return absl::ToDoubleSeconds(clock_->SteadyNow());
}

void IterationExecutor::Push(Event e) {
  e.seq = seq_++;
  heap_.push_back(e);
  std::push_heap(heap_.begin(), heap_.end(), EventLater());
}

void IterationExecutor::Fail(int m, int task, int from, int to,
                             double failed_at, double detect) {
  Mb& mb = mbs_[m];
  mb.awaiting = true;
  ++mb.gen;
  Event e{detect, 0, kDetect, to, m, task, mb.gen};
  e.from = from;
  e.failed_at = failed_at;
  Push(e);
}

// When the holder of an MB notices that `to` is gone: at once if gossip
// already says so, else after the stream timeout.
static double DetectAt(WorldHooks* world, double timeout, int to, double t) {
  const double gossip = world->GossipDeadTime(to);
  return gossip <= t ? t : std::min(t + timeout, gossip);
}

void IterationExecutor::SendHop(int m, int task, int from, double now) {
  Mb& mb = mbs_[m];
  mb.task = task;
  mb.admitted = false;
  const int to = TaskNode(mb.route.nodes, mb.p, task);
  const double death = world_->DeathTime(to);
  if (death <= now || !world_->LinkUp(from, to)) {
    const double failed_at = now;  // when this MB's hop failed
    const double detect = DetectAt(world_, options_.stream_timeout_s, to, now);
    if (task >= mb.p) {  // loss or backward: the state there is gone
      Event e{detect, 0, kDrop, to, m, task, mb.gen};
      e.failed_at = failed_at;
      mb.awaiting = true;
      Push(e);
    } else {
      Fail(m, task, from, to, failed_at, detect);
    }
    return;
  }
  Push({now + view_.hop_s(from, to), 0, kArrive, to, m, task, mb.gen});
}

void IterationExecutor::OnNodeDeath(int v) {
  if (!running_) return;
  const double now = Now();
  nodes_[v].dead = true;
  for (int m = 0; m < static_cast<int>(mbs_.size()); ++m) {
    Mb& mb = mbs_[m];
    if (mb.done || mb.dropped || mb.awaiting) continue;
    const int at = TaskNode(mb.route.nodes, mb.p, mb.task);
    const double detect = DetectAt(world_, options_.stream_timeout_s, v, now);
    if (mb.route.origin == v) {
      Event e{now, 0, kDrop, v, m, mb.task, mb.gen};
      e.failed_at = now;
      mb.awaiting = true;
      Push(e);
    } else if (at == v && mb.task < mb.p && mb.admitted) {
      // v had admitted its next forward: lost with it, as on a node (Note
      // [Lost with a neighbour] in node/stage/stage_server.cc); the holder
      // learns it when its stream to v breaks (or from gossip).
      Event e{detect, 0, kDrop, v, m, mb.task, mb.gen};
      e.failed_at = now;
      mb.awaiting = true;
      Push(e);
    } else if (at == v && mb.task < mb.p) {
      // Its next forward was on its way to v: the send fails and the
      // previous node, which still holds the input, re-routes it.
      mb.slot_nodes.erase(
          std::remove(mb.slot_nodes.begin(), mb.slot_nodes.end(), v),
          mb.slot_nodes.end());
      Fail(m, mb.task, mb.route.nodes[mb.task - 1], v, now, detect);
    } else if (std::find(mb.slot_nodes.begin(), mb.slot_nodes.end(), v) !=
               mb.slot_nodes.end()) {
      Event e{detect, 0, kDrop, v, m, mb.task, mb.gen};
      e.failed_at = now;
      mb.awaiting = true;
      Push(e);
    }
  }
}

void IterationExecutor::Drop(int m, double now, int failed_node,
                             double failed_at) {
  Mb& mb = mbs_[m];
  if (mb.done || mb.dropped) return;
  mb.dropped = true;
  ++mb.gen;
  --open_;
  ++result_.dropped;
  result_.end_s = std::max(result_.end_s, now);
  for (int v : mb.slot_nodes) {
    if (nodes_[v].dead) continue;
    --nodes_[v].slots_used;
    if (!nodes_[v].touched) {
      nodes_[v].touched = true;
      touched_.push_back(v);
    }
  }
  mb.slot_nodes.clear();
  result_.events.push_back({m, failed_node, failed_at, now, -1, -1, true});
}

void IterationExecutor::OnDetect(const Event& e, double now) {
  Mb& mb = mbs_[e.mb];
  if (mb.done || mb.dropped || mb.gen != e.gen) return;
  mb.awaiting = false;
  if (!options_.reroute || world_->DeathTime(e.from) <= now) {
    Drop(e.mb, now, e.node, e.failed_at);
    return;
  }
  // The holder repairs as a node does (node/stage/route_repair.h), with
  // the skip budget of the nodes backend's stage servers (allow_skip).
  node::RepairRequest req;
  req.iteration = options_.iteration;
  req.mb = static_cast<uint64_t>(mb.route.mb);
  for (int i = 0; i < mb.p; ++i) {
    const int v = mb.route.nodes[i];
    req.route.push_back({view_.node(v).id, view_.stage(v)});
  }
  req.holder = e.task - 1;
  req.failed = {view_.node(e.node).id};
  req.allow_shorter = true;
  const HolderView known(&view_, &index_, world_, now);
  absl::StatusOr<std::vector<node::RouteHop>> fixed = repairer_->Repair(req, known);
  if (!fixed.ok()) {
    Drop(e.mb, now, e.node, e.failed_at);
    return;
  }
  std::vector<int> nodes;
  for (const node::RouteHop& h : *fixed) nodes.push_back(index_.at(h.node));
  nodes.push_back(mb.route.origin);
  Resume(e, now, nodes);
}

void IterationExecutor::Resume(const Event& e, double now,
                               const std::vector<int>& nodes) {
  Mb& mb = mbs_[e.mb];
  mb.route.nodes = nodes;
  mb.p = static_cast<int>(nodes.size()) - 1;  // a skip may shorten it
  mb.rerouted = true;
  ++mb.gen;
  // The holder resends once it has chosen; the MB waits as "awaiting" so a
  // death in between is seen at the resend.
  Event resend{now + options_.reroute_compute_s, 0, kResend, e.from, e.mb,
               e.task, mb.gen};
  mb.awaiting = true;
  const int to = TaskNode(mb.route.nodes, mb.p, e.task);
  result_.events.push_back({e.mb, e.node, e.failed_at, now, resend.time,
                            resend.time + view_.hop_s(e.from, to), false});
  Push(resend);
}

void IterationExecutor::Finish(int m, double now) {
  Mb& mb = mbs_[m];
  mb.done = true;
  --open_;
  ++result_.completed;
  if (mb.rerouted) ++result_.rerouted;
  result_.end_s = std::max(result_.end_s, now);
  for (int i = 1; i < mb.p; ++i) ++result_.stage_visits[view_.stage(mb.route.nodes[i])];
  ++result_.stage_visits[0];
}

void IterationExecutor::TryStart(int v, double now) {
  NodeState& ns = nodes_[v];
  if (ns.busy || ns.dead) return;
  auto stale = [&](const Ready& r) {
    const Mb& mb = mbs_[r.mb];
    return mb.done || mb.dropped || mb.gen != r.gen;
  };
  while (!ns.forward.empty() && stale(ns.forward.top())) ns.forward.pop();
  while (!ns.backward.empty() && stale(ns.backward.top())) ns.backward.pop();
  const bool fwd_ok =
      !ns.forward.empty() && ns.slots_used < view_.memory_slots(v);
  const bool bwd_ok = !ns.backward.empty();
  if (!fwd_ok && !bwd_ok) return;
  bool take_fwd = fwd_ok;
  if (fwd_ok && bwd_ok) {
    take_fwd = ns.forward.top().priority < ns.backward.top().priority;
  }
  Ready task = take_fwd ? ns.forward.top() : ns.backward.top();
  (take_fwd ? ns.forward : ns.backward).pop();
  Mb& mb = mbs_[task.mb];
  if (take_fwd) {
    ++ns.slots_used;
    mb.slot_nodes.push_back(v);
  }
  ns.busy = true;
  const double c = view_.forward_s(v) * world_->SpeedFactor(v);
  const double d =
      task.task < mb.p ? c : (task.task == mb.p ? 0.25 * c : 1.5 * c);
  ns.busy_s += d;
  Push({now + d, 0, kDone, v, task.mb, task.task, task.gen});
}

IterationResult IterationExecutor::Run(const scheduler::Plan& plan) {
  const double start = Now();
  const int n = view_.num_nodes();
  result_ = IterationResult();
  result_.start_s = result_.end_s = start;
  result_.mbs = static_cast<int>(plan.routes.size());
  result_.stage_visits.assign(view_.num_stages(), 0);
  mbs_.assign(plan.routes.size(), Mb());
  nodes_.clear();
  nodes_.resize(n);
  heap_.clear();
  touched_.clear();
  seq_ = 0;
  open_ = result_.mbs;
  for (int v = 0; v < n; ++v) nodes_[v].dead = world_->DeathTime(v) <= start;
  for (int m = 0; m < result_.mbs; ++m) {
    Mb& mb = mbs_[m];
    mb.route = plan.routes[m];
    mb.p = static_cast<int>(mb.route.nodes.size()) - 1;
    const int o = mb.route.origin;
    const double t = start + std::max(0.0, mb.route.release_s);
    if (nodes_[o].dead) {
      Push({t, 0, kDrop, o, m, 0, 0, -1, t});
      mb.awaiting = true;
    } else {
      Push({t, 0, kArrive, o, m, 0, 0});
    }
  }
  running_ = true;
  while (open_ > 0) {
    if (heap_.empty()) {  // nothing can move: memory-slot deadlock
      result_.deadlocked = true;
      const double now = Now();
      for (int m = 0; m < result_.mbs; ++m) Drop(m, now, -1, now);
      break;
    }
    const double te = heap_.front().time;
    const double tt = absl::ToDoubleSeconds(
        clock_->next_deadline_or(absl::InfiniteDuration()));
    if (tt <= te) {  // churn first: it may change what the events mean
      clock_->AdvanceTo(clock_->next_deadline_or(absl::InfiniteDuration()));
      continue;
    }
    clock_->AdvanceTo(absl::Seconds(te));
    const double now = te;
    while (!heap_.empty() && heap_.front().time <= now) {
      std::pop_heap(heap_.begin(), heap_.end(), EventLater());
      const Event e = heap_.back();
      heap_.pop_back();
      Mb& mb = mbs_[e.mb];
      int touch = e.node;
      switch (e.type) {
        case kArrive:
          if (mb.done || mb.dropped || mb.gen != e.gen) break;
          if (e.task < mb.p) mb.admitted = true;
          (e.task < mb.p ? nodes_[e.node].forward : nodes_[e.node].backward)
              .push({mb.route.priority, e.time, mb.route.mb, e.mb, e.task,
                     e.gen});
          break;
        case kDone: {
          NodeState& ns = nodes_[e.node];
          if (ns.dead) break;
          ns.busy = false;
          if (mb.done || mb.dropped || mb.gen != e.gen) break;
          if (e.task > mb.p) {
            --ns.slots_used;
            mb.slot_nodes.erase(std::find(mb.slot_nodes.begin(),
                                          mb.slot_nodes.end(), e.node));
          }
          if (e.task == 2 * mb.p) {
            Finish(e.mb, now);
          } else {
            SendHop(e.mb, e.task + 1, e.node, now);
          }
          break;
        }
        case kDetect:
          OnDetect(e, now);
          touch = -1;
          break;
        case kDrop:
          Drop(e.mb, now, e.node, e.failed_at);
          touch = -1;
          break;
        case kResend:
          touch = -1;
          if (mb.done || mb.dropped || mb.gen != e.gen) break;
          mb.awaiting = false;
          SendHop(e.mb, e.task, e.node, now);
          break;
      }
      if (touch >= 0 && !nodes_[touch].touched) {
        nodes_[touch].touched = true;
        touched_.push_back(touch);
      }
    }
    std::sort(touched_.begin(), touched_.end());
    for (int v : touched_) {
      nodes_[v].touched = false;
      TryStart(v, now);
    }
    touched_.clear();
  }
  running_ = false;
  heap_.clear();
  result_.node_busy_s.resize(n);
  for (int v = 0; v < n; ++v) result_.node_busy_s[v] = nodes_[v].busy_s;
  if (clock_->SteadyNow() < absl::Seconds(result_.end_s)) {
    clock_->AdvanceTo(absl::Seconds(result_.end_s));
  }
  return std::move(result_);
}

}  // namespace skipswarm::sim
