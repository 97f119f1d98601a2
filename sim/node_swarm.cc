#include "sim/node_swarm.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "scheduler/evaluator.h"
#include "sim/node_sim.h"

namespace skipswarm::sim {
namespace internal {

absl::StatusOr<std::vector<node::RouteHop>> LoggedRepairer::Repair(const node::RepairRequest& r,
                                                                   const node::SwarmView& view) {
  absl::StatusOr<std::vector<node::RouteHop>> fixed = inner_->Repair(r, view);
  if (fixed.ok()) sim_->OnRepair(holder_, r, *fixed);
  return fixed;
}

void OriginTap::OnFinished(uint64_t iteration, uint64_t mb, const absl::Status& status) {
  sim_->OnFinished(origin_, iteration, mb, status);
  driver_->OnFinished(iteration, mb, status);
}

int NodeSim::AliveMembers() const {
  int n = 0;
  for (int u = 0; u < world_.size(); ++u) n += world_.Alive(u);
  return n;
}

absl::Status NodeSim::StartNode(int u, uint64_t first) {
  auto n = std::make_unique<SimNode>();
  const common::NodeId id = uni_.node(u).id;
  const int stage = world_.node(u).stage;
  n->compute = std::make_unique<WorldCompute>(
      std::make_unique<node::TimedStageCompute>(
          &clock_, node::TimedStageCompute::Options{
                       .stage = stage, .forward = absl::Seconds(uni_.forward_s(u))}),
      &world_, u);
  n->view = std::make_unique<WorldSwarmView>(&world_, u, swim_.get());
  SS_ASSIGN_OR_RETURN(std::unique_ptr<node::Transport> endpoint, board_net_->Attach(id));
  auto shaped = std::make_unique<node::ShapingTransport>(std::move(endpoint), &clock_,
                                                         node::ShapingOptions());
  for (int v = 0; v < uni_.num_nodes(); ++v) {
    if (v != u) shaped->SetLink(uni_.node(v).id, {absl::Seconds(uni_.hop_s(u, v)), 0});
  }
  n->transport = std::make_unique<WorldTransport>(std::move(shaped), &world_, u);
  n->repairer = std::make_unique<LoggedRepairer>(
      std::make_unique<node::SchedulerRouteRepairer>(SimRepairerOptions(sc_, &world_)), this, u);
  node::NodeStackOptions so;
  so.server.memory_slots = uni_.memory_slots(u);
  so.server.allow_skip = true;  // RerouteInFlight may skip a stage, as in the executor
  so.server.hop_deadline = absl::Seconds(120);
  so.driver.mbs_per_iteration = sc_.universe.workload.mb_per_data_node;
  so.driver.num_stages = uni_.num_stages();
  // MB deadlines: the node's defaults (Note [MB deadline]).
  node::NodeStackInputs in;
  in.transport = n->transport.get();
  in.clock = &clock_;
  in.routing = n->view.get();
  in.group = hub_.get();
  in.repairer = n->repairer.get();
  in.stages = {{stage, n->compute.get()}};
  in.data = &data_;
  if (stage == 0) {
    SS_ASSIGN_OR_RETURN(in.planner, node::SchedulerPlanner::Create(
                                        SimPlannerOptions(sc_, opts_, &world_, &plans_)));
    in.origin_tap = [this, u](node::OriginListener* driver) {
      return std::make_unique<OriginTap>(driver, this, u);
    };
  }
  n->stack = node::NodeStack::Create(so, std::move(in));
  n->member_since = Now();
  SimNode* raw = n.get();
  nodes_[u] = std::move(n);
  if (first >= static_cast<uint64_t>(iterations_)) {
    raw->done = true;
    return absl::OkStatus();
  }
  raw->stack->trainer()->Run(
      first, iterations_ - first,
      [this, u](const node::NodeIterationReport& r) { OnReport(u, r); },
      [raw](absl::Status) { raw->done = true; });
  return absl::OkStatus();
}

void NodeSim::TearDown(int u) {
  std::unique_ptr<SimNode>& n = nodes_[u];
  if (n == nullptr || n->stack == nullptr) return;
  n->stack.reset();
  n->transport.reset();  // leaves the switchboard
  busy_s_[u] += n->compute->busy_s();
  member_s_[u] += Now() - n->member_since;
  graveyard_.push_back(std::move(n));
}

void NodeSim::OnRepair(int holder, const node::RepairRequest& r,
                       const std::vector<node::RouteHop>& fixed) {
  if (r.failed.empty()) return;
  const double now = Now();
  const int f = world_.Find(r.failed.back());
  const int origin = world_.Find(r.route.front().node);
  if (f < 0 || origin < 0) return;
  const FailedSend& send = world_.last_failed_send();
  double failed_at = now;  // the view's verdict: known without sending
  if (send.valid && send.iteration == r.iteration && send.mb == r.mb && send.to == f) {
    failed_at = std::max(send.sent_s, world_.node(f).death);
  }
  const bool crashed = world_.node(f).death <= now;
  if (!crashed && world_.LinkUp(holder, f)) return;  // a full peer: not a failure
  repaired_.insert({origin, r.iteration, r.mb});  // counted if it completes
  if (!crashed) {
    ++report_.link_failures;
    return;
  }
  auto it = last_failure_.find(f);
  if (it == last_failure_.end()) return;
  FailureRecord& rec = report_.failures[it->second];
  ++rec.mbs_rerouted;
  if (rec.first_reroute_s < 0) rec.first_reroute_s = now - rec.at_s;
  rec.detect_s.push_back(now - failed_at);
  rec.reroute_s.push_back(0);
  const size_t next = static_cast<size_t>(r.holder) + 1;
  const int to = world_.Find(next < fixed.size() ? fixed[next].node : fixed.front().node);
  const int from = world_.Find(fixed[r.holder].node);
  rec.resume_s.push_back(from == to ? 0 : uni_.hop_s(from, to));
}

int NodeSim::FailureFor(double t, const std::string& message) const {
  // The status names the peer that failed (node/stage's drop messages).
  int named = -1;
  for (int i = 0; i < static_cast<int>(report_.failures.size()); ++i) {
    const FailureRecord& f = report_.failures[i];
    if (f.at_s > t) break;
    const std::string id = uni_.node(uni_.FindNode(f.node)).id.ShortString();
    if (!message.empty() && message.find(id) != std::string::npos) named = i;
  }
  if (named >= 0) return named;
  for (int i = static_cast<int>(report_.failures.size()) - 1; i >= 0; --i) {
    if (report_.failures[i].at_s <= t) return i;
  }
  return -1;
}

void NodeSim::OnFinished(int origin, uint64_t iteration, uint64_t mb, const absl::Status& status) {
  last_progress_ = Now();
  IterationBook& b = Book(iteration);
  if (status.ok()) {
    ++b.completed;
    if (repaired_.count({origin, iteration, mb})) ++b.rerouted;
    return;
  }
  const int f = FailureFor(Now(), std::string(status.message()));
  if (f >= 0) {
    ++report_.failures[f].mbs_dropped;
    ++b.attributed_drops;
  }
}

void NodeSim::OnReport(int u, const node::NodeIterationReport& r) {
  last_progress_ = Now();
  IterationBook& b = Book(r.iteration);
  b.end = std::max(b.end, Now());
  for (const auto& [stage, step] : r.stages) {
    report_.stage_visits[stage] += static_cast<int>(step.visits_here);
  }
  if (r.data && r.iteration + 1 > next_iteration_) {
    // The first data node's report of this iteration: revived nodes whose
    // state transfer is done join the next one.
    next_iteration_ = r.iteration + 1;
    if (opts_.progress) {
      const int width = 40, done = static_cast<int>(next_iteration_) * width / iterations_;
      *opts_.progress << "\r[" << std::string(done, '#') << std::string(width - done, '.')
                      << "] " << next_iteration_ << "/" << iterations_ << " iterations, t="
                      << static_cast<long>(Now()) << " s (real nodes)"
                      << (static_cast<int>(next_iteration_) == iterations_ ? "\n" : "")
                      << std::flush;
    }
    std::vector<int> ready;
    ready.swap(waiting_);
    for (int v : ready) {
      world_.Revive(v, Now());
      hub_->Admit({uni_.node(v).id, {world_.node(v).stage}, uni_.memory_slots(v), "", ""},
                  next_iteration_);
      absl::Status s = StartNode(v, next_iteration_);
      if (!s.ok()) report_.stopped_early = std::string(s.message());
    }
  }
}

// Every route set handed to a data node (node::PlanCache's listener).
void NodeSim::OnHandout(const node::PlanInput& input, int routes, const node::SharedPlan& plan,
                        bool fresh) {
  IterationBook& b = Book(input.iteration);
  b.mbs += routes;
  b.replanned |= fresh;
  if (b.planned) return;
  b.planned = true;
  b.members = static_cast<int>(plan.members.size());
  auto [it, added] = planned_s_.try_emplace(&plan, 0);
  if (added) it->second = scheduler::EvaluateTime(plan.view, plan.plan, nullptr);
  b.planned_s = it->second;
  if (plan.balance_relaxed && fresh) {
    report_.churn.push_back({Now(), "balance_relaxed",
                             absl::StrCat("tolerance ", plan.tolerance, ": ",
                                          plan.members.size(), " members")});
  }
}

absl::StatusOr<SimReport> NodeSim::Run() {
  if (opts_.wait_for_replacement) {
    return absl::InvalidArgumentError(
        "the full-pipeline baseline (wait_for_replacement) runs on the executor backend only");
  }
  const int n = uni_.num_nodes();
  iterations_ = opts_.iterations > 0 ? opts_.iterations : sc_.iterations;
  report_.scenario = sc_.name;
  report_.seed = sc_.seed;
  report_.planner = SimPlannerName(sc_, opts_);
  report_.replacement_s = opts_.replacement_s;
  const bool swim = opts_.detection == "swim" ||
                    (opts_.detection == "auto" && n <= opts_.swim_max_nodes);
  if (!swim && opts_.detection != "model" && opts_.detection != "auto") {
    return absl::InvalidArgumentError("detection must be auto, swim or model");
  }
  report_.detection = swim ? "swim" : "model";
  if (swim) {
    swim_ = std::make_unique<SwimGossip>(&clock_, &world_, &sc_, sc_.seed);
    swim_->SetVerdictListener([this](int observer, int subject, proto::MemberState state) {
      OnVerdict(observer, subject, state);
    });
  }
  report_.stage_visits.assign(uni_.num_stages(), 0);
  for (int u = 0; u < n; ++u) {
    report_.nodes.push_back({uni_.node(u).name, uni_.stage(u), uni_.node(u).region, 0, 0});
  }
  busy_s_.assign(n, 0);
  member_s_.assign(n, 0);
  nodes_.resize(n);
  board_net_ = std::make_unique<node::Switchboard>(&clock_);
  std::vector<node::PeerInfo> members;
  for (int u = 0; u < n; ++u) {
    if (!sc_.initially_present[u]) continue;  // joiners: Admit, later
    members.push_back({uni_.node(u).id, {uni_.stage(u)}, uni_.memory_slots(u), "", ""});
  }
  // Note [Stated pace] (node/train/silent_deadline.h): the data nodes'
  // driver options (the defaults but M, as built below).
  const node::DriverOptions driver;
  hub_ = std::make_unique<node::InProcessGroupHub>(
      &clock_, members, node::RobustOptions{}, node::SilentDeadlineOptions{},
      node::StatedPaceFor(driver.min_deadline, driver.deadline_factor,
                          sc_.universe.workload.mb_per_data_node));
  plans_.SetListener([this](const node::PlanInput& input, int routes,
                            const node::SharedPlan& plan,
                            bool fresh) { OnHandout(input, routes, plan, fresh); });
  for (int u = 0; u < n; ++u) {
    if (!sc_.initially_present[u]) continue;
    world_.node(u).present = true;
  }
  world_.Touch();
  for (int u = 0; u < n && swim_; ++u) {
    if (sc_.initially_present[u]) SS_RETURN_IF_ERROR(swim_->Start(u, /*founder=*/true));
  }
  for (int u = 0; u < n; ++u) {
    if (sc_.initially_present[u]) SS_RETURN_IF_ERROR(StartNode(u, 0));
  }
  for (const ChurnEvent& e : sc_.churn.events) {
    clock_.RunAt(absl::Seconds(e.at_s), [this, e] { Apply(e); });
  }
  const absl::Duration limit = absl::Hours(24 * 30);
  for (;;) {
    bool all = true;
    for (auto& node : nodes_) all &= node == nullptr || node->done;
    if (all) break;
    // (Gossip timers never run out: a run that stopped making progress
    // has hung too.)
    if (clock_.next_deadline_or(limit) >= limit || Now() > last_progress_ + kHungAfterS ||
        !clock_.RunNext()) {
      report_.stopped_early =
          "the node swarm hung (no event left, 30 simulated days, or an hour without progress)";
      break;
    }
  }
  report_.total_s = Now();
  report_.planning_wall_ms = plans_.planning_wall_ms();
  report_.plans = plans_.plans();
  double prev = 0;
  for (size_t i = 0; i < books_.size() && static_cast<int>(i) < iterations_; ++i) {
    IterationBook& b = books_[i];
    IterationRecord rec;
    rec.index = static_cast<int>(i);
    rec.start_s = prev;
    rec.time_s = b.end - prev;
    rec.planned_s = b.planned_s;
    rec.members = b.members;
    rec.mbs = b.mbs;
    rec.completed = b.completed;
    rec.dropped = b.mbs - b.completed;
    rec.rerouted = b.rerouted;
    rec.replanned = b.replanned;
    // MBs lost without a status (MB deadline, a dead origin): the latest
    // crash before the iteration ended.
    const int silent = rec.dropped - b.attributed_drops;
    const int f = FailureFor(b.end, "");
    if (silent > 0 && f >= 0) report_.failures[f].mbs_dropped += silent;
    prev = b.end;
    report_.iterations.push_back(rec);
  }
  for (int u = 0; u < n; ++u) TearDown(u);
  // Gossip's periodic timers stop with the Memberships; what is in flight
  // then drains.
  for (int u = 0; u < n && swim_; ++u) swim_->Crash(u);
  if (swim_) report_.gossip_messages = swim_->messages_sent();
  while (clock_.RunNext()) {
  }
  for (int u = 0; u < n; ++u) {
    report_.nodes[u].stage = world_.node(u).stage;
    report_.nodes[u].busy_s = busy_s_[u];
    report_.nodes[u].utilisation = member_s_[u] > 0 ? busy_s_[u] / member_s_[u] : 0;
  }
  return report_;
}

}  // namespace internal

absl::StatusOr<SimReport> RunNodeSimulation(const SimScenario& scenario,
                                            const SimOptions& options) {
  internal::NodeSim sim(scenario, options);
  return sim.Run();
}

}  // namespace skipswarm::sim
