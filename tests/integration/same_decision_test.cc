// Note [Same decision]: a simulated node (sim/node_swarm.h) routes exactly
// as a daemon does. One fixture (a scenario's swarm, its compute and hop
// figures, a kill) is fed to both:
//  * the simulator's planner and repairer, built by sim/node_planning.h
//    over its NodeWorld and WorldSwarmView, the costs from the scenario;
//  * a daemon's, built by node/daemon/stack/planner_factory.h from daemon
//    options that describe the same swarm (planner, path length, model
//    shape, seed), over a StaticSwarmView of the same members, the
//    fixture's figures given as its costs through PlanningCosts' seam;
//    what a simulation sets and a daemon does not (the seed of every
//    iteration, the search effort, the plan cache) is set alike, and
//    nothing else.
// Both must hand every data node the same routes (hops, priorities, data
// slots), make the same re-route or drop decision for every micro-batch
// whose next hop is killed, and re-plan the same after the kill.
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/sim_clock.h"
#include "gtest/gtest.h"
#include "node/daemon/stack/planner_factory.h"
#include "node/stage/swarm_view.h"
#include "node/train/plan_cache.h"
#include "node/train/scheduler_planner.h"
#include "node/train/scheduler_repairer.h"
#include "sim/node_planning.h"
#include "sim/node_world.h"
#include "sim/scenario.h"

namespace skipswarm {
namespace {

using node::PlannedRoute;
using node::RouteHop;

std::string Hops(const std::vector<RouteHop>& hops) {
  std::string out;
  for (const RouteHop& h : hops) out += h.node.ShortString() + "/" + std::to_string(h.stage) + " ";
  return out;
}

std::string Routes(const std::vector<PlannedRoute>& routes) {
  std::string out;
  for (const PlannedRoute& r : routes) {
    out += std::to_string(r.index) + " slot " + std::to_string(r.data_slot) + " prio " +
           std::to_string(r.priority) + ": " + Hops(r.hops) + "\n";
  }
  return out;
}

std::string Decision(const absl::StatusOr<std::vector<RouteHop>>& r) {
  if (!r.ok()) return "drop (" + std::string(absl::StatusCodeToString(r.status().code())) + ")";
  return "re-route " + Hops(*r);
}

class SameDecisionTest : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    absl::StatusOr<sim::SimScenario> sc = sim::LoadSimScenario(GetParam(), /*seed=*/7);
    ASSERT_TRUE(sc.ok()) << sc.status();
    sc_ = *std::move(sc);
    const scheduler::TopologyView& u = sc_.universe.view;
    world_ = std::make_unique<sim::NodeWorld>(&clock_, &u, sc_.detector.stream_timeout_s);
    std::vector<node::PeerInfo> members;
    for (int v = 0; v < u.num_nodes(); ++v) {
      if (!sc_.initially_present[v]) continue;
      world_->node(v).present = true;
      members.push_back({u.node(v).id, {u.stage(v)}, u.memory_slots(v), "", ""});
      index_[u.node(v).id] = v;
      if (u.stage(v) == 0) data_nodes_.push_back(v);
    }
    world_->Touch();
    daemon_view_ = std::make_unique<node::StaticSwarmView>(members);

    // The simulator's recipe.
    sim_options_.max_evaluations = 1000;  // a CI-sized search, both sides
    cache_ = std::make_unique<node::PlanCache>(sim::WorldCostsKey(world_.get()));
    auto sp = node::SchedulerPlanner::Create(
        sim::SimPlannerOptions(sc_, sim_options_, world_.get(), cache_.get()));
    ASSERT_TRUE(sp.ok()) << sp.status();
    sim_planner_ = *std::move(sp);
    sim_repairer_ = std::make_unique<node::SchedulerRouteRepairer>(
        sim::SimRepairerOptions(sc_, world_.get()));
    for (int v = 0; v < u.num_nodes(); ++v) {
      sim_views_.push_back(std::make_unique<sim::WorldSwarmView>(world_.get(), v));
    }

    // A daemon's recipe, for daemon options describing the same swarm.
    node::NodeDaemonOptions o;
    o.planner = sc_.planner;
    o.path_length = sc_.universe.workload.path_length;
    o.model.samples_per_mb = u.model().samples_per_mb;
    o.model.model.num_stages = u.num_stages();
    o.model.model.num_layers = u.model().layers_per_stage * u.num_stages();
    o.model.seed = sc_.seed;
    o.wan.timed_forward_s = 1;  // timed compute: a hop carries the payload below
    o.wan.timed_payload_bytes = static_cast<uint64_t>(u.model().bytes_per_mb);
    node::SchedulerPlannerOptions po = node::DataNodeSchedulerOptions(o, nullptr);
    node::SchedulerRepairerOptions ro = node::DaemonRepairerOptions(o, nullptr);
    // The fixture's figures, where a daemon reads its measurements.
    for (node::PlanningCosts* c : {&po.costs, &ro.costs}) {
      c->sec_per_layer_sample_of = [this](const common::NodeId& id) {
        return sc_.universe.view.node(index_.at(id)).sec_per_layer_sample;
      };
      c->hop_s_of = [this](const common::NodeId& a, const common::NodeId& b) {
        return sc_.universe.view.hop_s(index_.at(a), index_.at(b));
      };
    }
    // A simulation's settings (sim/node_planning.h).
    po.seed_per_iteration = false;
    po.max_evaluations = sim_options_.max_evaluations;
    po.stall_evaluations = sim_options_.stall_evaluations;
    po.candidates_per_stage = sim_options_.candidates_per_stage;
    // The scenarios' route rules are the daemons' defaults.
    const scheduler::Workload& w = sc_.universe.workload;
    ASSERT_EQ(w.max_swaps, po.max_swaps);
    ASSERT_EQ(w.max_jump, po.max_jump);
    ASSERT_EQ(w.balance_tolerance, po.balance_tolerance);
    ASSERT_EQ(w.max_swaps, ro.max_swaps);
    ASSERT_EQ(w.max_jump, ro.max_jump);
    auto dp = node::SchedulerPlanner::Create(po);
    ASSERT_TRUE(dp.ok()) << dp.status();
    daemon_planner_ = *std::move(dp);
    daemon_repairer_ = std::make_unique<node::SchedulerRouteRepairer>(ro);
  }

  node::PlanInput Input(uint64_t iteration, int data_node) const {
    return {iteration, sc_.universe.view.node(data_node).id,
            sc_.universe.workload.mb_per_data_node, sc_.universe.view.num_stages()};
  }

  // Both sides' routes for every data node; they must agree.
  std::map<int, std::vector<PlannedRoute>> PlanBoth(uint64_t iteration) {
    std::map<int, std::vector<PlannedRoute>> out;
    for (int d : data_nodes_) {
      auto s = sim_planner_->Plan(Input(iteration, d), *sim_views_[d]);
      auto dm = daemon_planner_->Plan(Input(iteration, d), *daemon_view_);
      EXPECT_TRUE(s.ok()) << s.status();
      EXPECT_TRUE(dm.ok()) << dm.status();
      if (!s.ok() || !dm.ok()) continue;
      EXPECT_EQ(Routes(*s), Routes(*dm)) << "data node " << d << ", iteration " << iteration;
      out[d] = *std::move(s);
    }
    return out;
  }

  // The node (not a data node) on the most routes.
  int Busiest(const std::map<int, std::vector<PlannedRoute>>& routes) const {
    std::map<int, int> uses;
    for (const auto& [d, rs] : routes) {
      for (const PlannedRoute& r : rs) {
        for (const RouteHop& h : r.hops) {
          if (h.stage != 0) ++uses[index_.at(h.node)];
        }
      }
    }
    int best = -1;
    for (const auto& [v, n] : uses) {
      if (best < 0 || n > uses[best]) best = v;
    }
    return best;
  }

  void Kill(int victim) {
    world_->Crash(victim);
    world_->DeclareDead(victim);  // the detector's verdict, in every view
    daemon_view_->MarkDead(sc_.universe.view.node(victim).id);
  }

  // Every route whose next hop is `victim`, repaired by both sides (with and
  // without a skip budget): the same re-route or the same drop.
  void RepairBoth(const std::map<int, std::vector<PlannedRoute>>& routes, int victim,
                  int* rerouted, int* dropped) {
    const common::NodeId dead = sc_.universe.view.node(victim).id;
    for (const auto& [d, rs] : routes) {
      for (const PlannedRoute& r : rs) {
        for (size_t h = 1; h < r.hops.size(); ++h) {
          if (r.hops[h].node != dead) continue;
          for (bool shorter : {false, true}) {
            node::RepairRequest req;
            req.iteration = 0;
            req.mb = static_cast<uint64_t>(r.index);
            req.route = r.hops;
            req.holder = static_cast<int>(h) - 1;
            req.failed = {dead};
            req.allow_shorter = shorter;
            const int holder = index_.at(r.hops[h - 1].node);
            const std::string s = Decision(sim_repairer_->Repair(req, *sim_views_[holder]));
            const std::string dm = Decision(daemon_repairer_->Repair(req, *daemon_view_));
            EXPECT_EQ(s, dm) << "mb " << r.index << " of data node " << d << " at hop " << h;
            ++(s.rfind("drop", 0) == 0 ? *dropped : *rerouted);
          }
        }
      }
    }
  }

  common::SimClock clock_;
  sim::SimScenario sc_;
  sim::SimOptions sim_options_;
  std::unique_ptr<sim::NodeWorld> world_;
  std::map<common::NodeId, int> index_;
  std::vector<int> data_nodes_;
  std::unique_ptr<node::StaticSwarmView> daemon_view_;
  std::unique_ptr<node::PlanCache> cache_;
  std::unique_ptr<node::SchedulerPlanner> sim_planner_;
  std::unique_ptr<node::SchedulerRouteRepairer> sim_repairer_;
  std::vector<std::unique_ptr<sim::WorldSwarmView>> sim_views_;
  std::unique_ptr<node::SchedulerPlanner> daemon_planner_;
  std::unique_ptr<node::SchedulerRouteRepairer> daemon_repairer_;
};

TEST_P(SameDecisionTest, SameRoutesSameRepairsAfterAKillSameReplan) {
  const auto before = PlanBoth(0);
  ASSERT_EQ(before.size(), data_nodes_.size());
  const int victim = Busiest(before);
  ASSERT_GE(victim, 0);
  Kill(victim);
  int rerouted = 0, dropped = 0;
  RepairBoth(before, victim, &rerouted, &dropped);
  EXPECT_GT(rerouted, 0);
  const auto after = PlanBoth(1);
  for (const auto& [d, rs] : after) {
    for (const PlannedRoute& r : rs) {
      for (const RouteHop& h : r.hops) EXPECT_NE(index_.at(h.node), victim);
    }
  }
  // Every other replica of the victim's stage dies too: repairs that need
  // the stage become drops (or skips, where the route rules allow them),
  // decided alike; neither side can plan.
  const int stage = sc_.universe.view.stage(victim);
  std::vector<int> rest;
  for (int v : sc_.universe.view.stage_nodes(stage)) {
    if (v != victim && sc_.initially_present[v]) rest.push_back(v);
  }
  for (int v : rest) Kill(v);
  for (int v : rest) RepairBoth(after, v, &rerouted, &dropped);
  // A full route cannot go on without the stage; a skip route skips it.
  const bool full_routes = sc_.universe.workload.path_length >= sc_.universe.view.num_stages();
  if (full_routes) {
    EXPECT_GT(dropped, 0);
  }
  for (int d : data_nodes_) {
    auto s = sim_planner_->Plan(Input(2, d), *sim_views_[d]);
    auto dm = daemon_planner_->Plan(Input(2, d), *daemon_view_);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_EQ(dm.status().code(), absl::StatusCode::kUnavailable);
  }
  std::cout << "FIGURE scenario=" << GetParam() << " data_nodes=" << data_nodes_.size()
            << " victim=" << sc_.universe.view.node(victim).name
            << " repairs_rerouted=" << rerouted << " repairs_dropped=" << dropped << "\n";
}

// small-static: full routes (P = S = 3); gcp12-42: skip routes (P = 6 of 8).
INSTANTIATE_TEST_SUITE_P(Scenarios, SameDecisionTest,
                         testing::Values("sim/scenarios/small-static.json",
                                         "sim/scenarios/gcp12-42.json"));

}  // namespace
}  // namespace skipswarm
