// Churn on the nodes backend (Note [Real-node churn] in sim/node_swarm.h):
// crashes, revivals, joins, stragglers, partitions and SWIM verdicts.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "scheduler/allocation.h"
#include "sim/node_sim.h"

namespace skipswarm::sim::internal {

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

}  // namespace skipswarm::sim::internal
