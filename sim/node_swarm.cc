#include "sim/node_swarm.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/random.h"
#include "common/sim_clock.h"
#include "common/status_macros.h"
#include "node/compute/timed_stage_compute.h"
#include "node/stage/stage_server.h"
#include "node/train/node_stack.h"
#include "node/train/data_node_driver.h"
#include "node/train/data_source.h"
#include "node/train/inproc_group.h"
#include "node/train/node_trainer.h"
#include "node/train/plan_cache.h"
#include "node/train/scheduler_planner.h"
#include "node/train/scheduler_repairer.h"
#include "node/transport/inproc_transport.h"
#include "node/transport/shaping_transport.h"
#include "scheduler/allocation.h"
#include "scheduler/evaluator.h"
#include "sim/detector.h"
#include "sim/node_planning.h"
#include "sim/node_world.h"
#include "sim/swim_gossip.h"

namespace skipswarm::sim {
namespace {

using MbKey = std::tuple<int, uint64_t, uint64_t>;  // origin, iteration, mb

// SWIM: a crash that is not out of every view this long after it is taken
// out of the replica hub anyway (and logged), so averaging cannot hang.
constexpr double kSwimVerdictLimitS = 60;
// A run with no report, no finished MB and no churn for this long has hung
// (with SWIM the clock always has gossip timers, so "no event left" cannot
// tell).
constexpr double kHungAfterS = 3600;

class NodeSim;

// Passes the repairer's answers to the simulation's log.
class LoggedRepairer final : public node::RouteRepairer {
 public:
  LoggedRepairer(std::unique_ptr<node::RouteRepairer> inner, NodeSim* sim, int holder)
      : inner_(std::move(inner)), sim_(sim), holder_(holder) {}
  absl::StatusOr<std::vector<node::RouteHop>> Repair(const node::RepairRequest& r,
                                                     const node::SwarmView& view) override;

 private:
  std::unique_ptr<node::RouteRepairer> inner_;
  NodeSim* sim_;
  int holder_;
};

// The data node's OriginListener, seen by the simulation on the way.
class OriginTap final : public node::OriginListener {
 public:
  OriginTap(node::OriginListener* driver, NodeSim* sim, int origin)
      : driver_(driver), sim_(sim), origin_(origin) {}
  void OnTail(uint64_t iteration, uint64_t mb, double loss) override {
    driver_->OnTail(iteration, mb, loss);
  }
  void OnFinished(uint64_t iteration, uint64_t mb, const absl::Status& status) override;

 private:
  node::OriginListener* driver_;
  NodeSim* sim_;
  int origin_;
};

struct SimNode {
  // Kept after a crash: timers of its tasks may still run.
  std::unique_ptr<WorldCompute> compute;
  std::unique_ptr<WorldSwarmView> view;
  std::unique_ptr<node::Transport> transport;
  std::unique_ptr<node::RouteRepairer> repairer;
  std::unique_ptr<node::NodeStack> stack;  // node/'s recipe; null once crashed
  bool done = false;
  double member_since = 0;
};

struct IterationBook {
  bool planned = false;
  double end = 0;
  int mbs = 0;
  int completed = 0;
  int rerouted = 0;
  int attributed_drops = 0;
  int members = 0;
  double planned_s = 0;
  bool replanned = false;
};

class NodeSim {
 public:
  NodeSim(const SimScenario& sc, const SimOptions& opts)
      : sc_(sc),
        opts_(opts),
        uni_(sc.universe.view),
        world_(&clock_, &sc.universe.view, sc.detector.stream_timeout_s),
        plans_(WorldCostsKey(&world_), opts.wall_clock),
        victims_(common::Random(sc.seed).Fork("victims")),
        detect_rng_(common::Random(sc.seed).Fork("detector")) {}

  absl::StatusOr<SimReport> Run();

  void OnRepair(int holder, const node::RepairRequest& r, const std::vector<node::RouteHop>& fixed);
  void OnVerdict(int observer, int subject, proto::MemberState state);
  void OnFinished(int origin, uint64_t iteration, uint64_t mb, const absl::Status& status);

 private:
  double Now() const { return world_.now(); }
  int AliveMembers() const;
  absl::Status StartNode(int u, uint64_t first);
  void TearDown(int u);
  void Kill(int u, const std::string& cause);
  void Revive(int u, double ready_at, const std::string& kind);
  int AutoStage(int joiner) const;
  void Apply(const ChurnEvent& e);
  void OnReport(int u, const node::NodeIterationReport& r);
  void OnHandout(const node::PlanInput& input, int routes, const node::SharedPlan& plan,
                 bool fresh);
  int FailureFor(double t, const std::string& message) const;
  // SWIM: whether every running node but `victim` has it out of its view;
  // then the failure's gossip_detect_s is set and the hub drops it.
  void CheckAllSee(int victim);
  IterationBook& Book(uint64_t i) {
    if (i >= books_.size()) books_.resize(i + 1);
    return books_[i];
  }

  const SimScenario& sc_;
  const SimOptions& opts_;
  const scheduler::TopologyView& uni_;
  common::SimClock clock_;
  NodeWorld world_;
  // The data nodes' planners share their plans (sim/node_planning.h).
  node::PlanCache plans_;
  std::map<const node::SharedPlan*, double> planned_s_;  // the evaluator's time
  common::Random victims_;
  common::Random detect_rng_;
  std::unique_ptr<node::Switchboard> board_net_;
  std::unique_ptr<node::InProcessGroupHub> hub_;
  node::SyntheticDataSource data_{2, 8, 32};
  std::vector<std::unique_ptr<SimNode>> nodes_;       // per universe node
  std::vector<std::unique_ptr<SimNode>> graveyard_;   // crashed incarnations
  std::vector<double> busy_s_;                        // over incarnations
  std::vector<double> member_s_;
  std::vector<int> waiting_;  // revived, to start at the next boundary
  std::vector<IterationBook> books_;
  std::map<int, int> last_failure_;  // universe node -> report_.failures
  std::set<MbKey> repaired_;
  int iterations_ = 0;
  uint64_t next_iteration_ = 0;  // the first iteration not yet reported
  double last_progress_ = 0;     // simulated time of the last report or MB
  SimReport report_;
  // Real SWIM detection (SimOptions::detection); null: the detector model.
  // Declared after world_ and the clock: destroyed before them.
  std::unique_ptr<SwimGossip> swim_;
  // SWIM: crashed nodes not yet out of every view -> their failure record.
  std::map<int, int> pending_;
};

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

void NodeSim::Kill(int u, const std::string& cause) {
  if (!world_.Alive(u)) return;
  const double now = Now();
  const int s = world_.node(u).stage;
  const bool random_kill =
      cause == "poisson_failures" || cause.rfind("correlated_failures", 0) == 0;
  if (random_kill && sc_.protect_last_replica) {
    int alive_in_stage = 0;
    for (int v = 0; v < world_.size(); ++v) {
      alive_in_stage += world_.Alive(v) && world_.node(v).stage == s;
    }
    if (alive_in_stage <= 1) {
      report_.churn.push_back({now, "spared", absl::StrCat(uni_.node(u).name,
                                                           " (last live node of stage ", s, ")")});
      return;
    }
  }
  const double detect =
      swim_ ? -1 : GossipDetectSeconds(sc_.detector, AliveMembers(), detect_rng_);
  world_.Crash(u);
  if (swim_) swim_->Crash(u);
  TearDown(u);
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), u), waiting_.end());
  FailureRecord f;
  f.node = uni_.node(u).name;
  f.stage = s;
  f.region = uni_.node(u).region;
  f.cause = cause;
  f.at_s = now;
  f.gossip_detect_s = f.first_gossip_detect_s = detect;
  last_failure_[u] = static_cast<int>(report_.failures.size());
  report_.failures.push_back(std::move(f));
  const common::NodeId id = uni_.node(u).id;
  if (swim_) {
    // Detected by the nodes' own Memberships (OnVerdict). The crash may
    // also complete another victim's detection: u no longer has a say.
    pending_[u] = last_failure_[u];
    std::vector<int> others;
    for (const auto& [v, index] : pending_) others.push_back(v);
    for (int v : others) CheckAllSee(v);
    // Never wait for a verdict forever (replica averaging would).
    clock_.RunAfter(absl::Seconds(kSwimVerdictLimitS), [this, u, id, now] {
      if (world_.node(u).death != now || !pending_.count(u)) return;
      pending_.erase(u);
      report_.churn.push_back({Now(), "gossip_verdict_missing", uni_.node(u).name});
      hub_->MarkDead(id);
    });
  } else {
    clock_.RunAfter(absl::Seconds(detect), [this, u, id, now] {
      if (world_.node(u).death != now) return;  // revived and crashed again
      world_.DeclareDead(u);
      hub_->MarkDead(id);
    });
  }
  if (opts_.replacement_s > 0) {
    clock_.RunAfter(absl::Seconds(opts_.replacement_s), [this, u] {
      if (world_.Alive(u)) return;
      Revive(u, Now(), "replaced");
    });
  }
}

// As sim/driver.h: the scheduler's allocation on the latest plan's view, or
// (no plan yet) the non-data stage with the least compute capacity.
int NodeSim::AutoStage(int joiner) const {
  if (const node::SharedPlan* p = plans_.latest()) {
    std::vector<double> hop_to;
    for (const node::PeerInfo& m : p->members) hop_to.push_back(uni_.hop_s(joiner, world_.Find(m.id)));
    absl::StatusOr<int> s = scheduler::ChooseStageForJoiner(p->view, uni_.node(joiner), hop_to);
    if (s.ok()) return *s;
  }
  std::vector<double> cap(uni_.num_stages(), 0);
  for (int v = 0; v < world_.size(); ++v) {
    if (world_.Alive(v)) cap[world_.node(v).stage] += 1 / (uni_.forward_s(v) * world_.node(v).speed);
  }
  int best = std::min(1, uni_.num_stages() - 1);
  for (int s = 1; s < uni_.num_stages(); ++s) {
    if (cap[s] < cap[best]) best = s;
  }
  return best;
}

void NodeSim::Revive(int u, double ready_at, const std::string& kind) {
  report_.churn.push_back({Now(), kind, absl::StrCat(uni_.node(u).name, " stage ",
                                                     world_.node(u).stage)});
  if (swim_) {
    // Its machine is back: the daemon's Membership starts now (a fresh one,
    // same key), while the state transfer runs.
    if (auto it = pending_.find(u); it != pending_.end()) {
      pending_.erase(it);
      hub_->MarkDead(uni_.node(u).id);  // its old life: no verdict came
    }
    absl::Status s = swim_->Start(u, /*founder=*/false);
    if (!s.ok()) report_.stopped_early = std::string(s.message());
  }
  // Not a member (planners and repairers ignore it) until it starts.
  world_.node(u).present = true;
  world_.node(u).death = world_.node(u).declared_dead = kNever;
  world_.node(u).ready_at = kNever;
  world_.Touch();
  clock_.RunAt(absl::Seconds(std::max(ready_at, Now())), [this, u] {
    if (world_.node(u).death == kNever) waiting_.push_back(u);
  });
}

void NodeSim::Apply(const ChurnEvent& e) {
  const double now = Now();
  last_progress_ = now;
  switch (e.kind) {
    case ChurnKind::kKill:
      for (const std::string& n : e.nodes) Kill(uni_.FindNode(n), e.cause);
      break;
    case ChurnKind::kKillRandom: {
      std::vector<int> eligible;
      for (int v = 0; v < world_.size(); ++v) {
        if (!world_.Alive(v)) continue;
        const int s = world_.node(v).stage;
        const bool ok = e.stages.empty() ? s != 0
                                         : std::count(e.stages.begin(), e.stages.end(), s);
        if (ok) eligible.push_back(v);
      }
      if (eligible.empty()) break;
      Kill(eligible[victims_.UniformInt(0, eligible.size() - 1)], e.cause);
      break;
    }
    case ChurnKind::kJoin:
    case ChurnKind::kRevive:
      for (const std::string& n : e.nodes) {
        const int u = uni_.FindNode(n);
        if (e.kind == ChurnKind::kRevive && world_.Alive(u)) continue;
        if (sc_.auto_stage[u]) {
          world_.node(u).stage = AutoStage(u);
          world_.Touch();
        }
        // With SWIM the news of it spreads by the real protocol (each view
        // has it once its record arrived); the model adds its spread time.
        Revive(u,
               now + sc_.state_transfer_s +
                   (swim_ ? 0 : GossipSpreadSeconds(sc_.detector, AliveMembers())),
               ChurnKindName(e.kind));
      }
      break;
    case ChurnKind::kSlowStart: {
      std::vector<int> who;
      for (const std::string& n : e.nodes) who.push_back(uni_.FindNode(n));
      if (who.empty()) {
        std::vector<int> alive;
        for (int v = 0; v < world_.size(); ++v) {
          if (world_.Alive(v)) alive.push_back(v);
        }
        victims_.Shuffle(alive);
        alive.resize(std::min<size_t>(alive.size(), e.count));
        std::sort(alive.begin(), alive.end());
        who = alive;
        ChurnEvent end = e;
        end.kind = ChurnKind::kSlowEnd;
        for (int v : who) end.nodes.push_back(uni_.node(v).name);
        clock_.RunAfter(absl::Seconds(e.duration_s), [this, end] { Apply(end); });
      }
      for (int v : who) {
        world_.SetSpeed(v, e.factor);
        report_.churn.push_back({now, "slow_start", absl::StrCat(uni_.node(v).name, " x",
                                                                 e.factor)});
      }
      break;
    }
    case ChurnKind::kSlowEnd:
      for (const std::string& n : e.nodes) {
        world_.SetSpeed(uni_.FindNode(n), 1);
        report_.churn.push_back({now, "slow_end", n});
      }
      break;
    case ChurnKind::kPartitionStart:
      world_.AddPartition(e.regions);
      report_.churn.push_back({now, "partition_start", absl::StrJoin(e.regions, ",")});
      break;
    case ChurnKind::kPartitionEnd:
      world_.RemovePartition(e.regions);
      report_.churn.push_back({now, "partition_end", absl::StrJoin(e.regions, ",")});
      break;
  }
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

void NodeSim::OnVerdict(int observer, int subject, proto::MemberState state) {
  if (state != proto::MEMBER_STATE_DEAD) return;
  auto it = pending_.find(subject);
  if (it != pending_.end()) {
    FailureRecord& f = report_.failures[it->second];
    if (f.first_gossip_detect_s < 0) f.first_gossip_detect_s = Now() - f.at_s;
    CheckAllSee(subject);
    return;
  }
  // A verdict about a member that is up and reachable from the observer
  // (not a crashed node, not across a partition) is a false positive.
  if (world_.Alive(subject) && world_.LinkUp(observer, subject) &&
      world_.node(subject).ready_at <= Now()) {
    ++report_.gossip_false_dead;
  }
}

void NodeSim::CheckAllSee(int victim) {
  for (int w = 0; w < world_.size(); ++w) {
    if (w != victim && swim_->running(w) && swim_->Live(w, victim)) return;
  }
  auto it = pending_.find(victim);
  if (it == pending_.end()) return;
  FailureRecord& f = report_.failures[it->second];
  f.gossip_detect_s = Now() - f.at_s;
  if (f.first_gossip_detect_s < 0) f.first_gossip_detect_s = f.gossip_detect_s;
  pending_.erase(it);
  hub_->MarkDead(uni_.node(victim).id);
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
  hub_ = std::make_unique<node::InProcessGroupHub>(&clock_, members);
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

}  // namespace

absl::StatusOr<SimReport> RunNodeSimulation(const SimScenario& scenario,
                                            const SimOptions& options) {
  NodeSim sim(scenario, options);
  return sim.Run();
}

}  // namespace skipswarm::sim
