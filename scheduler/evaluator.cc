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
struct ReadyLater {  // min-heap order
  bool operator()(const Ready& a, const Ready& b) const {
    if (a.priority != b.priority) return a.priority > b.priority;
    if (a.ready_s != b.ready_s) return a.ready_s > b.ready_s;
    if (a.mb != b.mb) return a.mb > b.mb;
    return a.route > b.route;
  }
};
using ReadyQueue = std::priority_queue<Ready, std::vector<Ready>, ReadyLater>;

struct Event {
  double time;
  long seq;
  bool done;  // true: a task finished on `node`; false: a task arrived
  int node;
  int route;
  int task;
};
struct EventLater {
  bool operator()(const Event& a, const Event& b) const {
    if (a.time != b.time) return a.time > b.time;
    return a.seq > b.seq;
  }
};

struct NodeState {
  bool busy = false;
  int slots_used = 0;
  double busy_s = 0;
  ReadyQueue forward;
  ReadyQueue backward;  // loss and backward tasks
};

// Task t of a route with p = nodes.size() - 1 hops: see evaluator.h.
inline int TaskNode(const std::vector<int>& nodes, int p, int t) {
  if (t < p) return nodes[t];
  if (t == p) return nodes[0];
  return nodes[2 * p - t];
}

struct SimOut {
  double iteration_s = 0;
  bool deadlocked = false;
  std::vector<double>* route_finish = nullptr;
  std::vector<double>* node_busy = nullptr;
};

void Simulate(const TopologyView& view, const Plan& plan, SimOut& out) {
  const int n = view.num_nodes();
  const int num_routes = static_cast<int>(plan.routes.size());
  std::vector<NodeState> nodes(n);
  std::priority_queue<Event, std::vector<Event>, EventLater> events;
  long seq = 0;
  for (int r = 0; r < num_routes; ++r) {
    const Route& route = plan.routes[r];
    events.push({std::max(0.0, route.release_s), seq++, false, route.nodes[0],
                 r, 0});
  }
  if (out.route_finish) out.route_finish->assign(num_routes, kInf);
  int finished = 0;
  double last = 0;
  std::vector<int> touched;
  std::vector<char> is_touched(n, 0);

  auto duration = [&](int r, int t, int v) {
    const int p = static_cast<int>(plan.routes[r].nodes.size()) - 1;
    const double c = view.forward_s(v);
    if (t < p) return c;
    if (t == p) return 0.25 * c;
    return 1.5 * c;
  };
  auto try_start = [&](int v, double now) {
    NodeState& ns = nodes[v];
    if (ns.busy) return;
    const bool fwd_ok =
        !ns.forward.empty() && ns.slots_used < view.memory_slots(v);
    const bool bwd_ok = !ns.backward.empty();
    if (!fwd_ok && !bwd_ok) return;
    bool take_fwd = fwd_ok;
    if (fwd_ok && bwd_ok) {
      take_fwd = ns.forward.top().priority < ns.backward.top().priority;
    }
    Ready task = take_fwd ? ns.forward.top() : ns.backward.top();
    (take_fwd ? ns.forward : ns.backward).pop();
    if (take_fwd) ++ns.slots_used;
    ns.busy = true;
    const double d = duration(task.route, task.task, v);
    ns.busy_s += d;
    events.push({now + d, seq++, true, v, task.route, task.task});
  };

  while (!events.empty()) {
    const double now = events.top().time;
    while (!events.empty() && events.top().time <= now) {
      const Event e = events.top();
      events.pop();
      const Route& route = plan.routes[e.route];
      const int p = static_cast<int>(route.nodes.size()) - 1;
      if (!e.done) {
        Ready ready{route.priority, e.time, route.mb, e.route, e.task};
        (e.task < p ? nodes[e.node].forward : nodes[e.node].backward)
            .push(ready);
      } else {
        NodeState& ns = nodes[e.node];
        ns.busy = false;
        if (e.task > p) --ns.slots_used;
        if (e.task == 2 * p) {
          ++finished;
          last = std::max(last, e.time);
          if (out.route_finish) (*out.route_finish)[e.route] = e.time;
        } else {
          const int next = TaskNode(route.nodes, p, e.task + 1);
          events.push({e.time + view.hop_s(e.node, next), seq++, false, next,
                       e.route, e.task + 1});
        }
      }
      if (!is_touched[e.node]) {
        is_touched[e.node] = 1;
        touched.push_back(e.node);
      }
    }
    std::sort(touched.begin(), touched.end());
    for (int v : touched) {
      try_start(v, now);
      is_touched[v] = 0;
    }
    touched.clear();
  }
  out.deadlocked = finished < num_routes;
  out.iteration_s = out.deadlocked ? kInf : last;
  if (out.node_busy) {
    out.node_busy->resize(n);
    for (int v = 0; v < n; ++v) (*out.node_busy)[v] = nodes[v].busy_s;
  }
}

}  // namespace

double EvaluateTime(const TopologyView& view, const Plan& plan,
                    std::vector<double>* route_finish_s) {
  SimOut out;
  out.route_finish = route_finish_s;
  Simulate(view, plan, out);
  return out.iteration_s;
}

absl::StatusOr<Evaluation> Evaluate(const TopologyView& view,
                                    const Plan& plan) {
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
  SimOut out;
  out.route_finish = &ev.route_finish_s;
  out.node_busy = &ev.node_busy_s;
  Simulate(view, plan, out);
  ev.iteration_time_s = out.iteration_s;
  ev.deadlocked = out.deadlocked;
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
  }
  double capacity = 0;  // visits per second over all non-origin nodes
  for (int s = 1; s < view.num_stages(); ++s) {
    for (int v : view.stage_nodes(s)) capacity += 1 / (2.5 * view.forward_s(v));
  }
  const double visits = static_cast<double>(view.data_nodes().size()) * m *
                        (workload.path_length - 1);
  lb.spread_work_s = visits / capacity;
  lb.seconds =
      std::max({lb.origin_work_s, lb.origin_memory_s, lb.spread_work_s});
  return lb;
}

}  // namespace skipswarm::scheduler
