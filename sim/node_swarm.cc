#include "sim/node_swarm.h"

#include <algorithm>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include <nlohmann/json.hpp>
#include <cmath>
#include "common/sim_clock.h"
#include "common/status_macros.h"
#include "node/compute/task_runner.h"
#include "node/compute/timed_stage_compute.h"
#include "node/stage/stage_server.h"
#include "node/stage/swarm_view.h"
#include "node/train/data_node_driver.h"
#include "node/train/data_source.h"
#include "node/train/inproc_group.h"
#include "node/train/node_trainer.h"
#include "node/train/route_planner.h"
#include "node/transport/inproc_transport.h"
#include "node/transport/shaping_transport.h"
#include "scheduler/planner.h"

namespace skipswarm::sim {
namespace {

// A node::RoutePlanner backed by the scheduler: builds a TopologyView of the
// members this data node believes alive (from the scenario's universe) and
// returns its own routes of the scheduler planner's plan (all of them,
// however many the plan gives this origin). The plan is kept
// while the set of live members is unchanged.
class SchedulerRoutePlanner final : public node::RoutePlanner {
 public:
  SchedulerRoutePlanner(const scheduler::Scenario* universe,
                        std::unique_ptr<scheduler::Planner> planner,
                        uint64_t seed, const NodeSwarmOptions& options)
      : uni_(universe), planner_(std::move(planner)), seed_(seed),
        options_(options) {}

  std::string name() const override { return planner_->name(); }

  absl::StatusOr<std::vector<node::PlannedRoute>> Plan(
      const node::PlanInput& input, const node::SwarmView& view) override {
    const scheduler::TopologyView& u = uni_->view;
    std::vector<int> members;
    for (const node::PeerInfo& m : view.Members()) {
      const int v = u.FindNode(m.id);
      if (v >= 0 && view.IsAlive(m.id)) members.push_back(v);
    }
    std::sort(members.begin(), members.end());
    if (members != members_) {
      members_ = members;
      SS_RETURN_IF_ERROR(Replan());
    }
    const int self = u.FindNode(input.self);
    std::vector<node::PlannedRoute> out;
    for (const scheduler::Route& r : plan_.routes) {
      if (members_[r.origin] != self) continue;
      node::PlannedRoute pr;
      pr.index = static_cast<int>(out.size());
      pr.priority = r.priority;  // served in plan order (Note [Queue order])
      for (size_t h = 0; h + 1 < r.nodes.size(); ++h) {
        const int v = members_[r.nodes[h]];
        pr.hops.push_back({u.node(v).id, u.stage(v)});
      }
      out.push_back(std::move(pr));
    }
    // Every route the plan gives this origin, which may be more or fewer
    // than input.mbs: the pipeline planner spreads all D x M MBs over its
    // pipelines' data nodes only.
    return out;
  }

 private:
  absl::Status Replan() {
    const scheduler::TopologyView& u = uni_->view;
    const int n = static_cast<int>(members_.size());
    std::vector<scheduler::NodeSpec> specs;
    std::vector<double> hops(static_cast<size_t>(n) * n, 0);
    for (int i = 0; i < n; ++i) {
      specs.push_back(u.node(members_[i]));
      for (int j = 0; j < n; ++j) {
        if (i != j) hops[i * n + j] = u.hop_s(members_[i], members_[j]);
      }
    }
    SS_ASSIGN_OR_RETURN(view_, scheduler::TopologyView::Create(
                                   u.model(), std::move(specs), std::move(hops)));
    scheduler::PlanRequest req;
    req.view = &view_;
    req.workload = uni_->workload;
    req.seed = seed_;
    req.max_evaluations = options_.max_evaluations;
    req.stall_evaluations = options_.stall_evaluations;
    // Routes given from outside are in universe indices: usable while every
    // node of the universe is a member.
    absl::StatusOr<scheduler::Plan> replay = absl::NotFoundError("no routes");
    if (planner_->name() == "replay") {
      if (n != u.num_nodes()) {
        return absl::UnavailableError("replay needs the whole swarm alive");
      }
      replay = uni_->RouteSet(options_.replay_key);
      if (!replay.ok()) return replay.status();
      req.replay = &*replay;
    }
    SS_ASSIGN_OR_RETURN(plan_, planner_->MakePlan(req));
    return absl::OkStatus();
  }

  const scheduler::Scenario* uni_;
  std::unique_ptr<scheduler::Planner> planner_;
  uint64_t seed_;
  NodeSwarmOptions options_;
  std::vector<int> members_;
  scheduler::TopologyView view_;
  scheduler::Plan plan_;
};

struct Node {
  // Declared first: outlives the server and trainer that use it.
  std::unique_ptr<node::StageCompute> compute;
  common::NodeId id;
  std::unique_ptr<node::StaticSwarmView> view;
  std::unique_ptr<node::Transport> transport;
  std::unique_ptr<node::StageServer> server;
  std::unique_ptr<SchedulerRoutePlanner> planner;
  std::unique_ptr<node::DataNodeDriver> driver;
  std::unique_ptr<node::NodeTrainer> trainer;
  bool done = false;
};

}  // namespace

absl::StatusOr<NodeSwarmResult> RunNodeSwarm(const SimScenario& sc,
                                             const NodeSwarmOptions& options) {
  const scheduler::TopologyView& u = sc.universe.view;
  const scheduler::Workload& w = sc.universe.workload;
  const std::string planner_name =
      options.planner.empty() ? sc.planner : options.planner;
  common::SimClock clock;
  node::ClockTaskRunner runner(&clock);
  node::Switchboard board(&clock, {});
  node::SyntheticDataSource data(2, 8, 32);
  std::vector<node::PeerInfo> members;
  std::vector<int> index;  // node slot -> universe index
  for (int v = 0; v < u.num_nodes(); ++v) {
    if (!sc.initially_present[v]) continue;
    members.push_back({u.node(v).id, {u.stage(v)}, u.memory_slots(v), "", ""});
    index.push_back(v);
  }
  node::InProcessGroupHub hub(&clock, members);
  std::vector<std::unique_ptr<Node>> nodes;
  for (size_t i = 0; i < index.size(); ++i) {
    const int v = index[i];
    auto n = std::make_unique<Node>();
    n->id = u.node(v).id;
    n->compute = std::make_unique<node::TimedStageCompute>(
        &clock, node::TimedStageCompute::Options{
                    .stage = u.stage(v), .forward = absl::Seconds(u.forward_s(v))});
    n->view = std::make_unique<node::StaticSwarmView>(members);
    SS_ASSIGN_OR_RETURN(std::unique_ptr<node::Transport> endpoint,
                        board.Attach(n->id));
    auto shaped = std::make_unique<node::ShapingTransport>(
        std::move(endpoint), &clock, node::ShapingOptions());
    for (size_t j = 0; j < index.size(); ++j) {
      if (j == i) continue;
      shaped->SetLink(u.node(index[j]).id,
                      {absl::Seconds(u.hop_s(v, index[j])), 0});
    }
    n->transport = std::move(shaped);
    node::StageServerOptions so;
    so.memory_slots = u.memory_slots(v);
    so.allow_skip = false;
    so.hop_deadline = absl::Seconds(120);
    std::map<int, node::StageCompute*> stages = {{u.stage(v), n->compute.get()}};
    n->server = std::make_unique<node::StageServer>(n->transport.get(), &clock,
                                                    n->view.get(), stages, so);
    n->server->Attach();
    if (u.stage(v) == 0) {
      SS_ASSIGN_OR_RETURN(auto planner, scheduler::CreatePlanner(planner_name));
      n->planner = std::make_unique<SchedulerRoutePlanner>(
          &sc.universe, std::move(planner), sc.seed, options);
      node::DriverOptions d;
      d.mbs_per_iteration = w.mb_per_data_node;
      d.num_stages = u.num_stages();
      // MB deadlines: the node's defaults (Note [MB deadline]).
      n->driver = std::make_unique<node::DataNodeDriver>(
          n->server.get(), &clock, n->view.get(), n->planner.get(), &data, d);
      n->server->SetOriginListener(n->driver.get());
    }
    n->trainer = std::make_unique<node::NodeTrainer>(
        n->server.get(), stages, n->driver.get(), &hub, &clock);
    nodes.push_back(std::move(n));
  }
  auto kill = [&](size_t i) {
    Node& n = *nodes[i];
    if (n.server == nullptr) return;
    n.trainer.reset();
    n.server->Detach();
    n.server.reset();
    n.driver.reset();
    n.transport.reset();  // leaves the switchboard: peers see failures
    hub.MarkDead(n.id);
  };
  for (const auto& [name, at] : options.kills) {
    const int v = u.FindNode(name);
    auto it = std::find(index.begin(), index.end(), v);
    if (it == index.end()) {
      return absl::InvalidArgumentError(absl::StrCat("no node ", name));
    }
    const size_t i = it - index.begin();
    clock.RunAt(absl::Seconds(at), [&kill, i] { kill(i); });
  }
  NodeSwarmResult result;
  std::vector<double> finished(options.iterations, 0);
  for (auto& node : nodes) {
    Node* n = node.get();
    n->trainer->Run(
        0, options.iterations,
        [&, n](const node::NodeIterationReport& r) {
          if (r.iteration < finished.size()) {
            finished[r.iteration] = std::max(
                finished[r.iteration], absl::ToDoubleSeconds(clock.SteadyNow()));
          }
          if (r.data) {
            result.completed += r.data->completed;
            result.dropped += r.data->dropped;
          }
        },
        [n](absl::Status) { n->done = true; });
  }
  const absl::Duration limit = absl::Hours(24);
  for (;;) {
    bool all = true;
    for (auto& n : nodes) all &= n->server == nullptr || n->done;
    if (all) break;
    if (clock.next_deadline_or(limit) >= limit || !clock.RunNext()) {
      return absl::DeadlineExceededError("the node swarm hung");
    }
  }
  for (auto& n : nodes) {
    if (n->server) result.rerouted += n->server->stats().rerouted;
  }
  double prev = 0;
  for (double t : finished) {
    result.iteration_s.push_back(t - prev);
    prev = t;
  }
  result.total_s = absl::ToDoubleSeconds(clock.SteadyNow());
  for (size_t i = 0; i < nodes.size(); ++i) kill(i);
  while (clock.RunNext()) {
  }
  return result;
}

std::vector<std::pair<std::string, double>> ExplicitKills(
    const SimScenario& scenario, int* unsupported) {
  std::vector<std::pair<std::string, double>> kills;
  *unsupported = 0;
  for (const ChurnEvent& e : scenario.churn.events) {
    if (e.kind != ChurnKind::kKill) {
      ++*unsupported;
      continue;
    }
    for (const std::string& n : e.nodes) kills.push_back({n, e.at_s});
  }
  return kills;
}

std::string NodeSwarmJson(const SimScenario& scenario,
                          const std::string& planner,
                          const NodeSwarmResult& result, int unsupported) {
  auto r = [](double x) { return std::round(x * 1e6) / 1e6; };
  nlohmann::ordered_json j;
  j["scenario"] = scenario.name;
  j["seed"] = scenario.seed;
  j["backend"] = "nodes";
  j["planner"] = planner;
  j["total_s"] = r(result.total_s);
  j["completed"] = result.completed;
  j["dropped"] = result.dropped;
  j["rerouted"] = result.rerouted;
  j["unsupported_churn_events"] = unsupported;
  nlohmann::ordered_json its = nlohmann::ordered_json::array();
  for (size_t i = 0; i < result.iteration_s.size(); ++i) {
    its.push_back({{"index", i}, {"time_s", r(result.iteration_s[i])}});
  }
  j["iterations"] = std::move(its);
  return j.dump(1) + "\n";
}

}  // namespace skipswarm::sim
