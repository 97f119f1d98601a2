#include "sim/driver.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/sim_clock.h"
#include "common/status_macros.h"
#include "scheduler/evaluator.h"
#include "scheduler/allocation.h"
#include "scheduler/planner.h"
#include "scheduler/replan.h"
#include "scheduler/route_search.h"
#include "sim/detector.h"
#include "sim/executor.h"

namespace skipswarm::sim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Everything about the swarm that churn changes, in universe indices.
struct World {
  std::vector<bool> present;  // a member (joined, not left for good)
  std::vector<double> death;  // crash time; +inf while alive
  std::vector<double> gossip_dead;
  std::vector<double> ready_at;  // serving from (state transfer done)
  std::vector<int> stage;
  std::vector<double> speed;  // straggler factor
  std::vector<double> benched_until;  // idle pipeline (baseline), until
  std::vector<std::vector<std::string>> partitions;  // active region sets
};

class Sim : public WorldHooks {
 public:
  Sim(const SimScenario& sc, const SimOptions& opts)
      : sc_(sc),
        opts_(opts),
        uni_(sc.universe.view),
        victims_(common::Random(sc.seed).Fork("victims")),
        detect_rng_(common::Random(sc.seed).Fork("detector")) {}

  absl::StatusOr<SimReport> Run();

  // WorldHooks, in the current view's indices.
  double DeathTime(int v) override { return w_.death[map_[v]]; }
  double GossipDeadTime(int v) override { return w_.gossip_dead[map_[v]]; }
  bool LinkUp(int u, int v) override { return UniLinkUp(map_[u], map_[v]); }
  // The view already holds the speed measured when it was built.
  double SpeedFactor(int v) override {
    return w_.speed[map_[v]] / view_speed_[v];
  }

 private:
  bool UniLinkUp(int a, int b) const;
  double Now() { return absl::ToDoubleSeconds(clock_.SteadyNow()); }
  int AliveMembers() const;
  void Schedule(const ChurnEvent& e);
  void Apply(const ChurnEvent& e);
  void Kill(int u, const std::string& cause);
  void Join(int u, const std::string& kind);
  int AutoStage(int joiner) const;
  absl::Status BuildView(bool* changed);
  absl::StatusOr<scheduler::Plan> MakePlan(bool view_changed, bool* replanned);
  void Record(const IterationResult& r, const scheduler::Plan& plan);

  const SimScenario& sc_;
  const SimOptions& opts_;
  const scheduler::TopologyView& uni_;
  common::SimClock clock_;
  common::Random victims_;
  common::Random detect_rng_;
  World w_;
  SimReport report_;

  // The current planning view and its index maps.
  scheduler::TopologyView view_;
  std::vector<int> map_;       // view index -> universe index
  std::vector<int> inverse_;   // universe index -> view index or -1
  std::vector<double> view_speed_;  // straggler factor inside the view
  std::string view_key_;
  bool view_ok_ = false;
  std::vector<int> removed_since_plan_;
  bool only_removals_ = true;
  scheduler::Plan plan_;       // in view indices
  std::unique_ptr<scheduler::Planner> planner_;
  IterationExecutor* running_ = nullptr;
  std::map<int, int> last_failure_;  // universe node -> report_.failures idx
  std::vector<double> member_since_;  // for utilisation
  std::vector<double> member_time_;
};

bool Sim::UniLinkUp(int a, int b) const {
  for (const auto& regions : w_.partitions) {
    const bool ia = std::find(regions.begin(), regions.end(),
                              uni_.node(a).region) != regions.end();
    const bool ib = std::find(regions.begin(), regions.end(),
                              uni_.node(b).region) != regions.end();
    if (ia != ib) return false;
  }
  return true;
}

int Sim::AliveMembers() const {
  int n = 0;
  for (size_t u = 0; u < w_.present.size(); ++u) {
    n += w_.present[u] && w_.death[u] == kInf;
  }
  return n;
}

void Sim::Kill(int u, const std::string& cause) {
  if (!w_.present[u] || w_.death[u] != kInf) return;
  const double now = Now();
  const int s = w_.stage[u];
  const bool random_kill = cause == "poisson_failures" ||
                           cause.rfind("correlated_failures", 0) == 0;
  if (random_kill && sc_.protect_last_replica) {
    int alive_in_stage = 0;
    for (size_t v = 0; v < w_.present.size(); ++v) {
      alive_in_stage += w_.present[v] && w_.death[v] == kInf && w_.stage[v] == s;
    }
    if (alive_in_stage <= 1) {
      report_.churn.push_back({now, "spared", absl::StrCat(
          uni_.node(u).name, " (last live node of stage ", s, ")")});
      return;
    }
  }
  w_.death[u] = now;
  w_.gossip_dead[u] =
      now + GossipDetectSeconds(sc_.detector, AliveMembers(), detect_rng_);
  FailureRecord f;
  f.node = uni_.node(u).name;
  f.stage = s;
  f.region = uni_.node(u).region;
  f.cause = cause;
  f.at_s = now;
  f.gossip_detect_s = w_.gossip_dead[u] - now;
  f.first_gossip_detect_s = f.gossip_detect_s;  // the model: every view at once
  // Gossip's verdict changes the view: give a stalled swarm a moment to
  // wake up at.
  clock_.RunAt(absl::Seconds(w_.gossip_dead[u]), [] {});
  last_failure_[u] = static_cast<int>(report_.failures.size());
  report_.failures.push_back(std::move(f));
  const double back = now + opts_.replacement_s;
  if (opts_.wait_for_replacement) {
    // A fixed pipeline that lost a member stands idle until the
    // replacement arrives: bench the rest of its routes' nodes.
    if (!inverse_.empty() && inverse_[u] >= 0) {
      for (const scheduler::Route& r : plan_.routes) {
        if (std::find(r.nodes.begin(), r.nodes.end(), inverse_[u]) ==
            r.nodes.end()) {
          continue;
        }
        for (int v : r.nodes) {
          if (v >= 0) w_.benched_until[map_[v]] = back;
        }
      }
    }
  }
  if (opts_.replacement_s > 0) {
    clock_.RunAt(absl::Seconds(back), [this, u] {
      w_.death[u] = w_.gossip_dead[u] = kInf;
      w_.ready_at[u] = Now();
      report_.churn.push_back({Now(), "replaced", uni_.node(u).name});
    });
  }
  if (running_ != nullptr && inverse_[u] >= 0) running_->OnNodeDeath(inverse_[u]);
}

int Sim::AutoStage(int joiner) const {
  // The scheduler's allocation, on the current view.
  if (view_ok_ && view_.num_nodes() > 0) {
    std::vector<double> hop_to;
    for (int v : map_) hop_to.push_back(uni_.hop_s(joiner, v));
    absl::StatusOr<int> s =
        scheduler::ChooseStageForJoiner(view_, uni_.node(joiner), hop_to);
    if (s.ok()) return *s;
  }
  // No view yet: the non-data stage with the least compute capacity.
  std::vector<double> cap(uni_.num_stages(), 0);
  for (size_t v = 0; v < w_.present.size(); ++v) {
    if (w_.present[v] && w_.death[v] == kInf) {
      cap[w_.stage[v]] += 1 / (uni_.forward_s(v) * w_.speed[v]);
    }
  }
  int best = std::min(1, uni_.num_stages() - 1);
  for (int s = 1; s < uni_.num_stages(); ++s) {
    if (cap[s] < cap[best]) best = s;
  }
  return best;
}

void Sim::Join(int u, const std::string& kind) {
  const double now = Now();
  if (sc_.auto_stage[u]) w_.stage[u] = AutoStage(u);
  w_.present[u] = true;
  w_.death[u] = w_.gossip_dead[u] = kInf;
  w_.ready_at[u] = now + sc_.state_transfer_s +
                   GossipSpreadSeconds(sc_.detector, AliveMembers());
  clock_.RunAt(absl::Seconds(w_.ready_at[u]), [] {});
  report_.churn.push_back({now, kind, absl::StrCat(uni_.node(u).name,
                                                   " stage ", w_.stage[u])});
}

void Sim::Apply(const ChurnEvent& e) {
  const double now = Now();
  switch (e.kind) {
    case ChurnKind::kKill:
      for (const std::string& n : e.nodes) Kill(uni_.FindNode(n), e.cause);
      break;
    case ChurnKind::kKillRandom: {
      std::vector<int> eligible;
      for (size_t v = 0; v < w_.present.size(); ++v) {
        if (!w_.present[v] || w_.death[v] != kInf) continue;
        const int s = w_.stage[v];
        const bool ok = e.stages.empty()
                            ? s != 0
                            : std::count(e.stages.begin(), e.stages.end(), s);
        if (ok) eligible.push_back(static_cast<int>(v));
      }
      if (eligible.empty()) break;
      Kill(eligible[victims_.UniformInt(0, eligible.size() - 1)], e.cause);
      break;
    }
    case ChurnKind::kJoin:
    case ChurnKind::kRevive:
      for (const std::string& n : e.nodes) {
        const int u = uni_.FindNode(n);
        if (e.kind == ChurnKind::kRevive && w_.death[u] == kInf) continue;
        Join(u, ChurnKindName(e.kind));
      }
      break;
    case ChurnKind::kSlowStart: {
      std::vector<int> who;
      for (const std::string& n : e.nodes) who.push_back(uni_.FindNode(n));
      if (who.empty()) {
        std::vector<int> alive;
        for (size_t v = 0; v < w_.present.size(); ++v) {
          if (w_.present[v] && w_.death[v] == kInf) alive.push_back(v);
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
        w_.speed[v] = e.factor;
        report_.churn.push_back({now, "slow_start", absl::StrCat(
            uni_.node(v).name, " x", e.factor)});
      }
      break;
    }
    case ChurnKind::kSlowEnd:
      for (const std::string& n : e.nodes) {
        w_.speed[uni_.FindNode(n)] = 1;
        report_.churn.push_back({now, "slow_end", n});
      }
      break;
    case ChurnKind::kPartitionStart:
      w_.partitions.push_back(e.regions);
      report_.churn.push_back({now, "partition_start", absl::StrJoin(e.regions, ",")});
      break;
    case ChurnKind::kPartitionEnd: {
      auto it = std::find(w_.partitions.begin(), w_.partitions.end(), e.regions);
      if (it != w_.partitions.end()) w_.partitions.erase(it);
      report_.churn.push_back({now, "partition_end", absl::StrJoin(e.regions, ",")});
      break;
    }
  }
}

void Sim::Schedule(const ChurnEvent& e) {
  clock_.RunAt(absl::Seconds(e.at_s), [this, e] { Apply(e); });
}

absl::Status Sim::BuildView(bool* changed) {
  const double now = Now();
  std::vector<int> members;
  std::string key;
  for (int u = 0; u < uni_.num_nodes(); ++u) {
    if (w_.present[u] && w_.ready_at[u] <= now && w_.gossip_dead[u] > now &&
        w_.benched_until[u] <= now) {
      members.push_back(u);
      absl::StrAppend(&key, u, ":", w_.stage[u], ":", w_.speed[u], ",");
    }
  }
  for (const auto& p : w_.partitions) absl::StrAppend(&key, "|", absl::StrJoin(p, ","));
  *changed = key != view_key_;
  if (!*changed) return view_ok_ ? absl::OkStatus()
                                 : absl::FailedPreconditionError("unplannable view");
  // Removal-only change (for incremental re-planning)?
  std::vector<int> old_map = map_;
  only_removals_ = view_ok_ && w_.partitions.empty();
  for (int u : members) {
    if (inverse_.empty() || inverse_[u] < 0) only_removals_ = false;
  }
  view_key_ = key;
  std::vector<scheduler::NodeSpec> specs;
  const int n = static_cast<int>(members.size());
  std::vector<double> hops(static_cast<size_t>(n) * n, scheduler::kNoLink);
  for (int i = 0; i < n; ++i) {
    scheduler::NodeSpec spec = uni_.node(members[i]);
    spec.stage = w_.stage[members[i]];
    spec.sec_per_layer_sample *= w_.speed[members[i]];
    specs.push_back(spec);
    for (int j = 0; j < n; ++j) {
      if (i != j && UniLinkUp(members[i], members[j])) {
        hops[i * n + j] = uni_.hop_s(members[i], members[j]);
      } else if (i == j) {
        hops[i * n + j] = 0;
      }
    }
  }
  absl::StatusOr<scheduler::TopologyView> view = scheduler::TopologyView::Create(
      uni_.model(), std::move(specs), std::move(hops));
  view_ok_ = view.ok();
  if (!view.ok()) {
    only_removals_ = false;
    return view.status();
  }
  std::vector<int> inverse(uni_.num_nodes(), -1);
  for (int i = 0; i < n; ++i) inverse[members[i]] = i;
  if (only_removals_ && opts_.replan == "incremental" && !plan_.routes.empty()) {
    // The scheduler's incremental re-plan, one departed node at a time, on
    // the old view (its indices), before the plan moves to the new one.
    scheduler::TopologyView old_view = view_;
    for (int i = 0; i < old_view.num_nodes() && only_removals_; ++i) {
      if (inverse[old_map[i]] >= 0) continue;
      absl::StatusOr<scheduler::ReplanResult> r = scheduler::ReplanWithoutNode(
          old_view, sc_.universe.workload, plan_, i);
      if (!r.ok()) {
        only_removals_ = false;  // full re-plan instead
        break;
      }
      old_view = std::move(r->view);
      plan_ = std::move(r->plan);
    }
  }
  view_ = *std::move(view);
  map_ = members;
  view_speed_.clear();
  for (int u : members) view_speed_.push_back(w_.speed[u]);
  inverse_ = std::move(inverse);
  // Remap the old plan for an incremental update.
  if (only_removals_) {
    for (scheduler::Route& r : plan_.routes) {
      for (int& v : r.nodes) {
        const int u = old_map[v];
        v = inverse_[u];  // -1 if it left
      }
      r.origin = r.nodes.front();
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<scheduler::Plan> Sim::MakePlan(bool view_changed,
                                              bool* replanned) {
  *replanned = false;
  if (!view_changed) return plan_;
  const bool incremental = opts_.replan == "incremental" && only_removals_ &&
                           !plan_.routes.empty();
  scheduler::PlanRequest req;
  req.view = &view_;
  req.workload = sc_.universe.workload;
  req.seed = sc_.seed;
  req.max_evaluations = opts_.max_evaluations;
  req.stall_evaluations = opts_.stall_evaluations;
  req.candidates_per_stage = opts_.candidates_per_stage;
  scheduler::Plan replay;
  if (planner_->name() == "replay" || incremental) {
    // Routes given from outside (or kept from the last plan) that use a
    // node no longer in the view are re-routed from their origin.
    if (!incremental) {
      SS_ASSIGN_OR_RETURN(replay, sc_.universe.RouteSet(sc_.replay_key));
      for (scheduler::Route& r : replay.routes) {
        for (int& v : r.nodes) v = inverse_[v];
        r.origin = r.nodes.front();
      }
    } else {
      replay = plan_;
    }
    scheduler::RouteSearcher searcher(view_, req.workload);
    std::vector<scheduler::Route> kept;
    for (scheduler::Route& r : replay.routes) {
      // Its data node is gone (or, incremental, the scheduler dropped it).
      if (r.origin < 0) continue;
      if (std::count(r.nodes.begin(), r.nodes.end(), -1)) {
        scheduler::RouteSearcher::Query q;
        q.path_length = static_cast<int>(r.nodes.size()) - 1;
        auto found = searcher.Best(r.origin, q);
        if (!found) continue;
        r.nodes = found->nodes;
      }
      kept.push_back(r);
    }
    replay.routes = std::move(kept);
    if (incremental) {
      ++report_.plans;
      *replanned = true;
      return replay;
    }
    req.replay = &replay;
  }
  ++report_.plans;
  *replanned = true;
  const absl::Duration t0 = opts_.wall_clock ? opts_.wall_clock->SteadyNow()
                                             : absl::ZeroDuration();
  absl::StatusOr<scheduler::Plan> plan = planner_->MakePlan(req);
  // A depleted swarm may not fit the balance rule; train on with a looser
  // one rather than stop (reported), up to "any balance".
  for (double tol = std::max(0.1, 2 * req.workload.balance_tolerance);
       !plan.ok() && tol <= 8; tol *= 2) {
    req.workload.balance_tolerance = tol;
    plan = planner_->MakePlan(req);
    if (plan.ok()) {
      report_.churn.push_back({Now(), "balance_relaxed",
                               absl::StrCat("tolerance ", tol, ": ",
                                            view_.num_nodes(), " members")});
    }
  }
  if (opts_.wall_clock) {
    report_.planning_wall_ms +=
        absl::ToDoubleMilliseconds(opts_.wall_clock->SteadyNow() - t0);
  }
  return plan;
}

void Sim::Record(const IterationResult& r, const scheduler::Plan& plan) {
  for (const RerouteRecord& e : r.events) {
    if (e.failed_node < 0) continue;  // deadlock: counted per iteration
    const int u = map_[e.failed_node];
    auto it = last_failure_.find(u);
    if (it == last_failure_.end() || w_.death[u] == kInf) {
      ++report_.link_failures;  // a cut link, not a crash
      continue;
    }
    FailureRecord& f = report_.failures[it->second];
    f.detect_s.push_back(e.detected_s - e.failed_at_s);
    if (e.dropped) {
      ++f.mbs_dropped;
    } else {
      ++f.mbs_rerouted;
      const double first = e.sent_s - f.at_s;
      if (f.first_reroute_s < 0 || first < f.first_reroute_s) f.first_reroute_s = first;
      f.reroute_s.push_back(e.sent_s - e.detected_s);
      f.resume_s.push_back(e.resumed_s - e.detected_s);
    }
  }
  for (size_t s = 0; s < r.stage_visits.size(); ++s) {
    report_.stage_visits[s] += r.stage_visits[s];
  }
  for (size_t v = 0; v < r.node_busy_s.size(); ++v) {
    report_.nodes[map_[v]].busy_s += r.node_busy_s[v];
    member_time_[map_[v]] += r.end_s - r.start_s;
  }
}

absl::StatusOr<SimReport> Sim::Run() {
  const int n = uni_.num_nodes();
  w_.present = sc_.initially_present;
  w_.death.assign(n, kInf);
  w_.gossip_dead.assign(n, kInf);
  w_.ready_at.assign(n, 0);
  w_.speed.assign(n, 1);
  w_.benched_until.assign(n, 0);
  for (int u = 0; u < n; ++u) w_.stage.push_back(uni_.stage(u));
  member_time_.assign(n, 0);
  report_.scenario = sc_.name;
  report_.seed = sc_.seed;
  report_.planner = opts_.planner.empty() ? sc_.planner : opts_.planner;
  report_.wait_for_replacement = opts_.wait_for_replacement;
  report_.replacement_s = opts_.replacement_s;
  report_.stage_visits.assign(uni_.num_stages(), 0);
  for (int u = 0; u < n; ++u) {
    report_.nodes.push_back({uni_.node(u).name, uni_.stage(u),
                             uni_.node(u).region, 0, 0});
  }
  SS_ASSIGN_OR_RETURN(planner_, scheduler::CreatePlanner(report_.planner));
  if (planner_->name() == "replay" && sc_.replay_key.empty()) {
    return absl::InvalidArgumentError("planner replay needs replay_key");
  }
  for (const ChurnEvent& e : sc_.churn.events) Schedule(e);
  const int iterations = opts_.iterations > 0 ? opts_.iterations : sc_.iterations;
  ExecutorOptions eopts;
  eopts.stream_timeout_s = sc_.detector.stream_timeout_s;
  eopts.reroute = !opts_.wait_for_replacement;
  eopts.reroute_compute_s = sc_.reroute_compute_s;
  for (int it = 0; it < iterations;) {
    bool changed = false;
    absl::Status built = BuildView(&changed);
    if (!built.ok()) {
      // Stalled: wait for the swarm to change.
      const double before = Now();
      if (!clock_.RunNext()) {
        report_.stopped_early = absl::StrCat("iteration ", it, ": ",
                                             built.message());
        break;
      }
      report_.stalled_s += Now() - before;
      continue;
    }
    bool replanned = false;
    absl::StatusOr<scheduler::Plan> plan = MakePlan(changed, &replanned);
    if (!plan.ok()) {
      report_.stopped_early = absl::StrCat("iteration ", it, ": planning: ",
                                           plan.status().message());
      break;
    }
    plan_ = *plan;
    IterationRecord rec;
    rec.index = it;
    rec.start_s = Now();
    rec.planned_s = scheduler::EvaluateTime(view_, plan_, nullptr);
    rec.members = view_.num_nodes();
    rec.replanned = replanned;
    eopts.iteration = static_cast<uint64_t>(it);
    IterationExecutor exec(view_, sc_.universe.workload, &clock_, this, eopts);
    running_ = &exec;
    IterationResult r = exec.Run(plan_);
    running_ = nullptr;
    rec.time_s = r.end_s - r.start_s;
    rec.mbs = r.mbs;
    rec.completed = r.completed;
    rec.dropped = r.dropped;
    rec.rerouted = r.rerouted;
    rec.deadlocked = r.deadlocked;
    Record(r, plan_);
    report_.iterations.push_back(rec);
    ++it;
    if (opts_.progress) {
      const int width = 40, done = it * width / iterations;
      *opts_.progress << "\r[" << std::string(done, '#')
                      << std::string(width - done, '.') << "] " << it << "/"
                      << iterations << " iterations, t=" << static_cast<long>(Now())
                      << " s" << (it == iterations ? "\n" : "") << std::flush;
    }
  }
  report_.total_s = Now();
  for (int u = 0; u < n; ++u) {
    report_.nodes[u].stage = w_.stage[u];
    report_.nodes[u].utilisation =
        member_time_[u] > 0 ? report_.nodes[u].busy_s / member_time_[u] : 0;
  }
  return report_;
}

}  // namespace

absl::StatusOr<SimReport> RunSimulation(const SimScenario& scenario,
                                        const SimOptions& options) {
  Sim sim(scenario, options);
  return sim.Run();
}

}  // namespace skipswarm::sim
