#include "scheduler/evaluator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>

#include "absl/strings/str_cat.h"
#include "scheduler/route_search.h"

namespace skipswarm::scheduler {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Ready {
  int priority;
  double ready_s;
  int mb;
  int route;
  int task;
};
// Heap order: the top (front) is the task to serve first.
struct ReadyLater {
  bool operator()(const Ready& a, const Ready& b) const {
    if (a.priority != b.priority) return a.priority > b.priority;
    if (a.ready_s != b.ready_s) return a.ready_s > b.ready_s;
    if (a.mb != b.mb) return a.mb > b.mb;
    return a.route > b.route;
  }
};

struct EventLater {
  bool operator()(const SimEvent& a, const SimEvent& b) const {
    if (a.time != b.time) return a.time > b.time;
    return a.seq > b.seq;
  }
};

// Task t of a route with p = nodes.size() - 1 hops: see evaluator.h.
inline int TaskNode(const std::vector<int>& nodes, int p, int t) {
  if (t < p) return nodes[t];
  if (t == p) return nodes[0];
  return nodes[2 * p - t];
}

}  // namespace

struct IterationSimulator::NodeState {
  bool busy = false;
  int slots_used = 0;
  double busy_s = 0;
  std::vector<Ready> forward;   // heaps (ReadyLater)
  std::vector<Ready> backward;  // loss and backward tasks
};

IterationSimulator::IterationSimulator() = default;
IterationSimulator::~IterationSimulator() = default;

double IterationSimulator::Run(const TopologyView& view, const Plan& plan,
                               std::vector<double>* route_finish,
                               std::vector<double>* node_busy,
                               bool* deadlocked, bool link_contention) {
  const int n = view.num_nodes();
  const int num_routes = static_cast<int>(plan.routes.size());
  if (static_cast<int>(nodes_.size()) < n) nodes_.resize(n);
  for (int v = 0; v < n; ++v) {
    NodeState& ns = nodes_[v];
    ns.busy = false;
    ns.slots_used = 0;
    ns.busy_s = 0;
    ns.forward.clear();
    ns.backward.clear();
  }
  events_.clear();
  const EventLater later;
  const ReadyLater ready_later;
  int32_t seq = 0;
  auto push_event = [&](const SimEvent& e) {
    events_.push_back(e);
    std::push_heap(events_.begin(), events_.end(), later);
  };
  for (int r = 0; r < num_routes; ++r) {
    const Route& route = plan.routes[r];
    push_event({std::max(0.0, route.release_s), seq++, r, 0, false});
  }
  if (route_finish) route_finish->assign(num_routes, kInf);
  int finished = 0;
  double last = 0;
  touched_.clear();
  is_touched_.assign(n, 0);
  link_free_.clear();

  auto try_start = [&](int v, double now) {
    NodeState& ns = nodes_[v];
    if (ns.busy) return;
    const bool fwd_ok =
        !ns.forward.empty() && ns.slots_used < view.memory_slots(v);
    const bool bwd_ok = !ns.backward.empty();
    if (!fwd_ok && !bwd_ok) return;
    bool take_fwd = fwd_ok;
    if (fwd_ok && bwd_ok) {
      take_fwd = ns.forward.front().priority < ns.backward.front().priority;
    }
    std::vector<Ready>& queue = take_fwd ? ns.forward : ns.backward;
    std::pop_heap(queue.begin(), queue.end(), ready_later);
    const Ready task = queue.back();
    queue.pop_back();
    if (take_fwd) ++ns.slots_used;
    ns.busy = true;
    const int p = static_cast<int>(plan.routes[task.route].nodes.size()) - 1;
    const double c = view.forward_s(v);
    const double d = task.task < p ? c : task.task == p ? 0.25 * c : 1.5 * c;
    ns.busy_s += d;
    push_event({now + d, seq++, task.route, task.task, true});
  };

  while (!events_.empty()) {
    const double now = events_.front().time;
    while (!events_.empty() && events_.front().time <= now) {
      std::pop_heap(events_.begin(), events_.end(), later);
      const SimEvent e = events_.back();
      events_.pop_back();
      const Route& route = plan.routes[e.route];
      const int p = static_cast<int>(route.nodes.size()) - 1;
      const int node = TaskNode(route.nodes, p, e.task);
      if (!e.done) {
        std::vector<Ready>& queue =
            e.task < p ? nodes_[node].forward : nodes_[node].backward;
        queue.push_back({route.priority, e.time, route.mb, e.route, e.task});
        std::push_heap(queue.begin(), queue.end(), ready_later);
      } else {
        NodeState& ns = nodes_[node];
        ns.busy = false;
        if (e.task > p) --ns.slots_used;
        if (e.task == 2 * p) {
          ++finished;
          last = std::max(last, e.time);
          if (route_finish) (*route_finish)[e.route] = e.time;
        } else {
          const int next = TaskNode(route.nodes, p, e.task + 1);
          double depart = e.time;
          const double hop = view.hop_s(node, next);
          if (link_contention) {
            double& free_at =
                link_free_[static_cast<int64_t>(node) * n + next];
            depart = std::max(depart, free_at);
            free_at = depart + hop;
          }
          push_event({depart + hop, seq++, e.route, e.task + 1, false});
        }
      }
      if (!is_touched_[node]) {
        is_touched_[node] = 1;
        touched_.push_back(node);
      }
    }
    std::sort(touched_.begin(), touched_.end());
    for (int v : touched_) {
      try_start(v, now);
      is_touched_[v] = 0;
    }
    touched_.clear();
  }
  const bool stuck = finished < num_routes;
  if (deadlocked) *deadlocked = stuck;
  if (node_busy) {
    node_busy->resize(n);
    for (int v = 0; v < n; ++v) (*node_busy)[v] = nodes_[v].busy_s;
  }
  return stuck ? kInf : last;
}

double EvaluateTime(const TopologyView& view, const Plan& plan,
                    std::vector<double>* route_finish_s) {
  IterationSimulator sim;
  return sim.Run(view, plan, route_finish_s);
}

absl::StatusOr<Evaluation> Evaluate(const TopologyView& view,
                                    const Plan& plan, bool link_contention) {
  for (const Route& r : plan.routes) {
    if (r.nodes.size() < 3 || r.nodes.front() != r.origin ||
        r.nodes.back() != r.origin) {
      return absl::InvalidArgumentError(absl::StrCat(
          "route of mb ", r.mb, " must start and end at its origin"));
    }
    for (int v : r.nodes) {
      if (v < 0 || v >= view.num_nodes()) {
        return absl::InvalidArgumentError(
            absl::StrCat("route of mb ", r.mb, ": node ", v, " out of range"));
      }
      if (!std::isfinite(r.release_s) || r.release_s < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "route of mb ", r.mb, ": release_s must be finite and >= 0"));
      }
    }
    for (size_t i = 0; i + 1 < r.nodes.size(); ++i) {
      if (!std::isfinite(view.hop_s(r.nodes[i], r.nodes[i + 1]))) {
        return absl::InvalidArgumentError(absl::StrCat(
            "route of mb ", r.mb, " uses a missing link ",
            view.node(r.nodes[i]).name, " -> ",
            view.node(r.nodes[i + 1]).name));
      }
    }
  }
  Evaluation ev;
  IterationSimulator sim;
  ev.iteration_time_s = sim.Run(view, plan, &ev.route_finish_s,
                                &ev.node_busy_s, &ev.deadlocked,
                                link_contention);
  ev.node_utilisation.resize(view.num_nodes());
  for (int v = 0; v < view.num_nodes(); ++v) {
    ev.node_utilisation[v] =
        ev.iteration_time_s > 0 && std::isfinite(ev.iteration_time_s)
            ? ev.node_busy_s[v] / ev.iteration_time_s
            : 0;
  }
  ev.stage_visits = StageVisits(view, plan);
  ev.origin_finish_s.assign(view.num_nodes(), 0);
  for (size_t r = 0; r < plan.routes.size(); ++r) {
    double& f = ev.origin_finish_s[plan.routes[r].origin];
    f = std::max(f, ev.route_finish_s[r]);
  }
  return ev;
}

absl::StatusOr<LowerBound> ComputeLowerBound(const TopologyView& view,
                                             const Workload& workload) {
  if (absl::Status st = ValidateWorkload(view, workload); !st.ok()) return st;
  LowerBound lb;
  RouteSearcher searcher(view, workload);
  const int m = workload.mb_per_data_node;
  for (int o : view.data_nodes()) {
    const double c = view.forward_s(o);
    lb.origin_work_s = std::max(lb.origin_work_s, m * 2.75 * c);
    std::optional<FoundRoute> best = searcher.Best(o, {});
    if (!best) {
      return absl::FailedPreconditionError(absl::StrCat(
          "data node '", view.node(o).name, "' has no valid route of length ",
          workload.path_length, " under the swap/jump rules"));
    }
    lb.fastest_route_s.push_back(best->latency_s);
    const int waves = (m + view.memory_slots(o) - 1) / view.memory_slots(o);
    lb.origin_memory_s = std::max(lb.origin_memory_s, waves * best->latency_s);
    const int slots = view.memory_slots(o);
    if (m > slots) {
      const double l = best->latency_s;
      lb.origin_tail_s =
          std::max(lb.origin_tail_s, 2 * l - 1.5 * c + (m - slots) * 1.5 * c +
                                         (m - slots - 1) * c);
    }
  }
  double capacity = 0;  // visits per second over all non-origin nodes
  for (int s = 1; s < view.num_stages(); ++s) {
    for (int v : view.stage_nodes(s)) capacity += 1 / (2.5 * view.forward_s(v));
  }
  const double visits = static_cast<double>(view.data_nodes().size()) * m *
                        (workload.path_length - 1);
  lb.spread_work_s = visits / capacity;
  lb.seconds = std::max({lb.origin_work_s, lb.origin_memory_s,
                         lb.spread_work_s, lb.origin_tail_s});
  return lb;
}

}  // namespace skipswarm::scheduler
